// How an embedding model turns its last hidden states into one vector, as its pipeline says:
// sentence-transformers folders (modules.json: Pooling with 1_Pooling/config.json, Dense layers
// with their config.json + model.safetensors, Normalize; config_sentence_transformers.json:
// prompts; sentence_bert_config.json: max_seq_length), GGUF files ({arch}.pooling_type:
// 0 none, 1 mean, 2 CLS, 3 last, 4 rank), else mean pooling without normalisation (what
// sentence-transformers builds for a plain transformers folder).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace brisk {

enum class PoolingMode { none, mean, cls, last, max };

struct DenseLayer {
  int32_t n_in = 0, n_out = 0;
  std::vector<float> w{};         // [n_out, n_in]
  std::vector<float> b{};         // [n_out] or empty
  bool tanh = false;              // activation_function: Tanh (else Identity)
};

struct PoolingConfig {
  PoolingMode mode = PoolingMode::mean;
  std::vector<DenseLayer> dense{};
  bool normalize = false;
  bool rank = false;              // GGUF pooling_type 4: a reranker (classification head)
  std::map<std::string, std::string> prompts{};  // name -> text put before the input
  std::string default_prompt{};   // default_prompt_name ("" none)
  int32_t max_seq_length = 0;     // 0: the model's positions
  bool lower_case = false;        // sentence_bert_config.json do_lower_case: texts lowercased first
  std::string source = "default"; // where the settings came from (for `brisk embed --verbose`, errors)
};

// A Hugging Face folder's sentence-transformers files (absent files leave the defaults);
// errors name the file and key. n_embd: width of the hidden states the first module gets.
PoolingConfig pooling_config_from_folder(const std::string& dir, int32_t n_embd);
// GGUF {arch}.pooling_type (-1: absent, mean).
PoolingConfig pooling_config_from_gguf(int32_t pooling_type, const std::string& key);

const char* pooling_name(PoolingMode m);
// "none", "mean", "cls", "last", "max"; throws naming the allowed values.
PoolingMode pooling_from_name(const std::string& name);

// Width of a pooled vector for hidden states of n_embd (the last Dense layer's n_out).
int32_t pooled_dim(const PoolingConfig& c, int32_t n_embd);

// hidden: [n, n_embd] one input's last hidden states -> its vector(s): [pooled_dim] (none:
// [n, pooled_dim]), Dense layers applied, L2-normalised when c.normalize (each row for none).
std::vector<float> pool(const PoolingConfig& c, const float* hidden, int64_t n, int32_t n_embd);

// Keeps the first `dims` values of each row of width `width` (Matryoshka), normalised again
// when `normalize`; dims <= 0 or >= width keeps the rows.
std::vector<float> truncate_dims(const std::vector<float>& v, int32_t width, int32_t dims, bool normalize);

void l2_normalize(float* v, int64_t n);

}  // namespace brisk
