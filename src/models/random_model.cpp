#include "models/random_model.h"

#include <cmath>
#include <memory>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "kernels/cpu/ops.h"

namespace brisk {

namespace {

struct Rng {  // xorshift64*: fast and reproducible
  uint64_t s;
  float uniform() {  // [-1, 1)
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return float(int64_t((s * 0x2545F4914F6CDD1DULL) >> 11) - (int64_t(1) << 52)) / float(int64_t(1) << 52);
  }
};

class Builder {
 public:
  explicit Builder(uint64_t seed) : rng_{seed * 0x9E3779B97F4A7C15ULL + 1} {}

  void matrix(gguf::Writer& w, const std::string& name, int64_t n_in, int64_t n_out, QuantType type) {
    auto rb = quant_row_bytes(type, uint64_t(n_in));
    if (!rb) {  // rows that are not whole blocks stay F32
      type = QuantType::F32;
      rb = uint64_t(n_in) * 4;
    }
    auto& data = store(size_t(*rb) * size_t(n_out));
    const float a = std::sqrt(3.0f / float(n_in));
    std::vector<float> row(static_cast<size_t>(n_in));
    for (int64_t r = 0; r < n_out; ++r) {
      for (float& x : row) x = a * rng_.uniform();
      cpu::row_from_f32(type, row.data(), data.data() + size_t(r) * size_t(*rb), n_in);
    }
    w.add_tensor(name, type, {uint64_t(n_in), uint64_t(n_out)}, data.data(), data.size());
  }

  void vector(gguf::Writer& w, const std::string& name, int64_t n, float base, float spread) {
    auto& data = store(size_t(n) * 4);
    auto* f = reinterpret_cast<float*>(data.data());
    for (int64_t i = 0; i < n; ++i) f[i] = base + spread * rng_.uniform();
    w.add_tensor(name, QuantType::F32, {uint64_t(n)}, data.data(), data.size());
  }

 private:
  std::vector<uint8_t>& store(size_t n) {
    buffers_.push_back(std::make_unique<std::vector<uint8_t>>(n));
    return *buffers_.back();
  }
  Rng rng_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> buffers_;
};

}  // namespace

RandomModelParams random_model_preset(const std::string& name) {
  if (name == "tiny") return {};
  if (name == "qwen2.5-0.5b")
    return {.arch = "qwen2", .n_vocab = 151936, .n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2,
            .head_dim = 64, .n_ff = 4864, .n_ctx_train = 32768, .rope_theta = 1000000.0f,
            .tie_embeddings = true};
  fail("unknown model shape '", name, "' (known: tiny, qwen2.5-0.5b)");
}

void random_model_write(const RandomModelParams& p, const std::string& path) {
  BRISK_CHECK(p.arch == "llama" || p.arch == "qwen2" || p.arch == "qwen3", "random model: unsupported arch '",
              p.arch, "'");
  gguf::Writer w;
  const std::string a = p.arch;
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string("random " + a));
  w.set(a + ".block_count", gguf::Value::from_u32(uint32_t(p.n_layer)));
  w.set(a + ".context_length", gguf::Value::from_u32(uint32_t(p.n_ctx_train)));
  w.set(a + ".embedding_length", gguf::Value::from_u32(uint32_t(p.n_embd)));
  w.set(a + ".feed_forward_length", gguf::Value::from_u32(uint32_t(p.n_ff)));
  w.set(a + ".attention.head_count", gguf::Value::from_u32(uint32_t(p.n_head)));
  w.set(a + ".attention.head_count_kv", gguf::Value::from_u32(uint32_t(p.n_head_kv)));
  w.set(a + ".attention.key_length", gguf::Value::from_u32(uint32_t(p.head_dim)));
  w.set(a + ".attention.value_length", gguf::Value::from_u32(uint32_t(p.head_dim)));
  w.set(a + ".rope.freq_base", gguf::Value::from_f32(p.rope_theta));
  w.set(a + ".attention.layer_norm_rms_epsilon", gguf::Value::from_f32(1e-6f));
  w.set(a + ".vocab_size", gguf::Value::from_u32(uint32_t(p.n_vocab)));

  Builder b(p.seed);
  const int64_t q_width = int64_t(p.n_head) * p.head_dim, kv_width = int64_t(p.n_head_kv) * p.head_dim;
  b.matrix(w, "token_embd.weight", p.n_embd, p.n_vocab, p.type);
  b.vector(w, "output_norm.weight", p.n_embd, 1.0f, 0.0f);
  if (!p.tie_embeddings) b.matrix(w, "output.weight", p.n_embd, p.n_vocab, p.type);
  for (int32_t il = 0; il < p.n_layer; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    b.vector(w, blk + "attn_norm.weight", p.n_embd, 1.0f, 0.0f);
    b.matrix(w, blk + "attn_q.weight", p.n_embd, q_width, p.type);
    b.matrix(w, blk + "attn_k.weight", p.n_embd, kv_width, p.type);
    b.matrix(w, blk + "attn_v.weight", p.n_embd, kv_width, p.type);
    if (a == "qwen2") {
      b.vector(w, blk + "attn_q.bias", q_width, 0.0f, 0.1f);
      b.vector(w, blk + "attn_k.bias", kv_width, 0.0f, 0.1f);
      b.vector(w, blk + "attn_v.bias", kv_width, 0.0f, 0.1f);
    }
    if (a == "qwen3") {
      b.vector(w, blk + "attn_q_norm.weight", p.head_dim, 1.0f, 0.0f);
      b.vector(w, blk + "attn_k_norm.weight", p.head_dim, 1.0f, 0.0f);
    }
    b.matrix(w, blk + "attn_output.weight", q_width, p.n_embd, p.type);
    b.vector(w, blk + "ffn_norm.weight", p.n_embd, 1.0f, 0.0f);
    b.matrix(w, blk + "ffn_gate.weight", p.n_embd, p.n_ff, p.type);
    b.matrix(w, blk + "ffn_up.weight", p.n_embd, p.n_ff, p.type);
    b.matrix(w, blk + "ffn_down.weight", p.n_ff, p.n_embd, p.type);
  }
  w.write(path);
}

}  // namespace brisk
