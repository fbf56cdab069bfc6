#include "quantize/hf_to_gguf.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "models/config.h"
#include "models/name_map.h"
#include "quantize/tokenizer_to_gguf.h"

namespace brisk {
namespace {

// HF q/k rows of one head are [first halves..., second halves...] (rotate_half); GGUF's are
// interleaved pairs. rows: [n_head * head_dim, n_in] -> same shape, rows reordered per head.
std::vector<float> permute_rows(const std::vector<float>& w, int64_t n_head, int64_t n_rows, int64_t n_in,
                                const std::string& name) {
  BRISK_CHECK(n_head > 0 && n_rows % (2 * n_head) == 0, "convert: ", name, ": ", n_rows,
              " rows do not split into ", n_head, " heads of pairs");
  const int64_t hd = n_rows / n_head, half = hd / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t src = h * hd + j * half + i, dst = h * hd + i * 2 + j;
        std::copy_n(w.begin() + src * n_in, n_in, out.begin() + dst * n_in);
      }
  return out;
}

// llama.cpp's llama3 rope factors: 1 for short wavelengths, `factor` for long, smooth between.
std::vector<float> llama3_rope_factors(const ModelConfig& c, int32_t dim) {
  const auto& s = c.rope_scaling;
  const float old_ctx = float(s.original_ctx > 0 ? s.original_ctx : 8192);
  const float low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
  std::vector<float> f;
  for (int32_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(double(c.rope_theta), double(i) / double(dim));
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) f.push_back(1.0f);
    else if (wavelen > low_wavelen) f.push_back(s.factor);
    else {
      const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f.push_back(float(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return f;
}

}  // namespace

void hf_to_gguf_f32(const std::string& folder, const std::string& out_path) {
  namespace fs = std::filesystem;
  const nlohmann::json cfg = read_json_file((fs::path(folder) / "config.json").string());
  BRISK_CHECK(cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string(), folder,
              "/config.json: no model_type");
  const std::string model_type = cfg["model_type"].get<std::string>();
  if (model_type == "whisper") return hf_to_gguf_whisper_f32(folder, out_path);
  BRISK_CHECK(model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3",
              "convert: model_type '", model_type, "' is not supported (llama, mistral, qwen2, qwen3)");
  ModelConfig c;
  c.arch = model_type;
  config_fill_from_hf(c, cfg);
  if (c.n_head_kv == 0) c.n_head_kv = c.n_head;
  BRISK_CHECK(c.n_head > 0 && c.n_embd > 0 && c.n_layer > 0, folder, "/config.json: missing sizes");
  if (c.head_dim == 0) c.head_dim = c.n_embd / c.n_head;
  const bool llama_family = model_type == "llama" || model_type == "mistral";
  const std::string a = llama_family ? "llama" : model_type;

  const auto ckpt = safetensors::Checkpoint::open(folder, MappedFile::Mode::mmap);
  if (c.n_vocab == 0)
    if (const auto* e = ckpt.find("model.embed_tokens.weight"); e && e->shape.size() == 2) c.n_vocab = int32_t(e->shape[0]);

  gguf::Writer w;
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string(fs::path(folder).filename().string()));
  w.set(a + ".block_count", gguf::Value::from_u32(uint32_t(c.n_layer)));
  w.set(a + ".context_length", gguf::Value::from_u32(uint32_t(c.n_ctx_train)));
  w.set(a + ".embedding_length", gguf::Value::from_u32(uint32_t(c.n_embd)));
  w.set(a + ".feed_forward_length", gguf::Value::from_u32(uint32_t(c.n_ff)));
  w.set(a + ".attention.head_count", gguf::Value::from_u32(uint32_t(c.n_head)));
  w.set(a + ".attention.head_count_kv", gguf::Value::from_u32(uint32_t(c.n_head_kv)));
  w.set(a + ".rope.freq_base", gguf::Value::from_f32(c.rope_theta));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(c.rms_eps));
  w.set(a + ".attention.key_length", gguf::Value::from_u32(uint32_t(c.head_dim)));
  w.set(a + ".attention.value_length", gguf::Value::from_u32(uint32_t(c.head_dim)));
  if (llama_family) w.set(a + ".rope.dimension_count", gguf::Value::from_u32(uint32_t(c.head_dim)));
  if (c.n_vocab > 0) w.set(a + ".vocab_size", gguf::Value::from_u32(uint32_t(c.n_vocab)));
  if (c.sliding_window > 0 && model_type == "mistral")
    w.set(a + ".attention.sliding_window", gguf::Value::from_u32(uint32_t(c.sliding_window)));
  w.set("general.file_type", gguf::Value::from_u32(0));
  if (fs::exists(fs::path(folder) / "tokenizer.json"))
    tokenizer_to_gguf({.folder = folder, .pre = llama_family && c.n_vocab > 100000 ? "llama-bpe" : "qwen2",
                       .n_vocab = c.n_vocab},
                      w);

  std::vector<std::unique_ptr<std::vector<float>>> keep;
  if (c.rope_scaling.type == "llama3") {
    keep.push_back(std::make_unique<std::vector<float>>(llama3_rope_factors(c, c.head_dim)));
    w.add_tensor("rope_freqs.weight", QuantType::F32, {uint64_t(keep.back()->size())}, keep.back()->data(),
                 keep.back()->size() * 4);
  }
  for (const auto& t : ckpt.tensors()) {
    const std::string name = hf_to_gguf_name(t.name);
    if (name.empty()) continue;
    BRISK_CHECK(!t.shape.empty() && t.shape.size() <= 2, "convert: ", t.name, " has ", t.shape.size(), " dims");
    std::vector<float> f = safetensors::to_f32(t);
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());  // GGUF order: innermost first
    if (llama_family && t.shape.size() == 2) {
      const bool q = name.find("attn_q.weight") != std::string::npos;
      const bool k = name.find("attn_k.weight") != std::string::npos;
      if (q || k) f = permute_rows(f, q ? c.n_head : c.n_head_kv, int64_t(t.shape[0]), int64_t(t.shape[1]), t.name);
    }
    keep.push_back(std::make_unique<std::vector<float>>(std::move(f)));
    w.add_tensor(name, QuantType::F32, ne, keep.back()->data(), keep.back()->size() * 4);
  }
  w.write(out_path);
}

}  // namespace brisk
