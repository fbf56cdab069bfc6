// Whisper (WhisperForConditionalGeneration): a speech encoder-decoder.
//   encoder, per 30 s window of n_frames log-mel frames [n_frames, n_mels]:
//     x = gelu(conv2(gelu(conv1(mel))))        conv1: k 3, stride 1; conv2: k 3, stride 2
//     x += embed_positions                     learned, [n_enc_ctx, d_model]
//     per layer: x += attn(ln(x)); x += fc2(gelu(fc1(ln(x))))    bidirectional attention
//     enc = ln(x); per decoder layer: its cross-attention K = enc Wk, V = enc Wv + bv, stored
//     once per window in the sequence's cross-attention cache
//   decoder, per token:
//     x = embed_tokens(id) + embed_positions(pos)
//     per layer: x += self_attn(ln(x)) (causal, KV cache); x += cross_attn(ln(x), enc);
//                x += fc2(gelu(fc1(ln(x))))
//     logits = ln(x) @ embed_tokens^T (proj_out, tied)
// LayerNorms use eps 1e-5 (PyTorch's default, which Whisper keeps); queries are scaled by
// head_dim^-1/2; k_proj has no bias. Sizes come from config.json (d_model, encoder_*,
// decoder_*, max_source_positions, max_target_positions, num_mel_bins, activation_function).
#include <cmath>

#include "core/error.h"
#include "models/dense_decoder.h"
#include "models/encoder_blocks.h"

namespace brisk {

namespace {

constexpr float kLayerNormEps = 1e-5f;

// model.encoder.* / model.decoder.* -> enc.* / GGUF-style decoder names.
std::string whisper_name(const std::string& hf) {
  static const std::pair<const char*, const char*> kGlobal[] = {
      {"model.encoder.conv1.weight", "enc.conv1.weight"},
      {"model.encoder.conv1.bias", "enc.conv1.bias"},
      {"model.encoder.conv2.weight", "enc.conv2.weight"},
      {"model.encoder.conv2.bias", "enc.conv2.bias"},
      {"model.encoder.embed_positions.weight", "enc.position_embd.weight"},
      {"model.encoder.layer_norm.weight", "enc.output_norm.weight"},
      {"model.encoder.layer_norm.bias", "enc.output_norm.bias"},
      {"model.decoder.embed_tokens.weight", "token_embd.weight"},
      {"model.decoder.embed_positions.weight", "position_embd.weight"},
      {"model.decoder.layer_norm.weight", "output_norm.weight"},
      {"model.decoder.layer_norm.bias", "output_norm.bias"},
      {"proj_out.weight", "output.weight"},
  };
  static const std::pair<const char*, const char*> kLayer[] = {
      {"self_attn.q_proj.", "attn_q."},        {"self_attn.k_proj.", "attn_k."},
      {"self_attn.v_proj.", "attn_v."},        {"self_attn.out_proj.", "attn_output."},
      {"self_attn_layer_norm.", "attn_norm."}, {"encoder_attn.q_proj.", "cross_attn_q."},
      {"encoder_attn.k_proj.", "cross_attn_k."}, {"encoder_attn.v_proj.", "cross_attn_v."},
      {"encoder_attn.out_proj.", "cross_attn_output."}, {"encoder_attn_layer_norm.", "cross_attn_norm."},
      {"final_layer_norm.", "ffn_norm."},      {"fc1.", "ffn_up."},
      {"fc2.", "ffn_down."},
  };
  for (const auto& [from, to] : kGlobal)
    if (hf == from) return to;
  for (const char* side : {"encoder", "decoder"}) {
    const std::string prefix = std::string("model.") + side + ".layers.";
    if (hf.compare(0, prefix.size(), prefix) != 0) continue;
    size_t q = prefix.size();
    while (q < hf.size() && hf[q] >= '0' && hf[q] <= '9') ++q;
    if (q == prefix.size() || q - prefix.size() > 6 || q >= hf.size() || hf[q] != '.') return "";
    const std::string layer = hf.substr(prefix.size(), q - prefix.size());
    const std::string rest = hf.substr(q + 1);
    for (const auto& [from, to] : kLayer) {
      const std::string f = from;
      if (rest.compare(0, f.size(), f) != 0) continue;
      const std::string tail = rest.substr(f.size());
      if (tail != "weight" && tail != "bias") return "";
      return std::string(side[0] == 'e' ? "enc.blk." : "blk.") + layer + "." + to + tail;
    }
  }
  return "";
}

struct EncLayer {
  NormWeights attn_norm;     // [d]
  AttentionWeights attn;     // q, k, v, o [d, d]; bq, bv, bo
  NormWeights ffn_norm;      // [d]
  FfnWeights ffn;            // up [n_enc_ff, d], down [d, n_enc_ff]
};

struct DecLayer {
  NormWeights attn_norm;     // [d]
  AttentionWeights attn;     // causal self-attention, q, k, v, o [d, d]; bq, bv, bo
  NormWeights cross_norm;    // [d]
  AttentionWeights cross;    // q, o act on the decoder; k, v [d, d] on the encoder output
  NormWeights ffn_norm;      // [d]
  FfnWeights ffn;            // up [n_ff, d], down [d, n_ff]
};

UnaryOp activation_of(const std::string& name) {
  if (name == "gelu" || name.empty()) return UnaryOp::gelu_erf;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") return UnaryOp::gelu_tanh;
  fail("whisper config: unsupported activation_function '", name, "' (gelu, gelu_new, gelu_pytorch_tanh)");
}

class Whisper final : public ArchModel {
 public:
  Whisper(const ModelConfig& cfg, WeightStore& ws) {
    const int32_t d = cfg.n_embd;
    BRISK_CHECK(cfg.n_enc_layer > 0 && cfg.n_enc_head > 0 && cfg.n_enc_ff > 0 && cfg.n_enc_ctx > 0 && cfg.n_mels > 0,
                "whisper config: encoder_layers, encoder_attention_heads, encoder_ffn_dim, max_source_positions and "
                "num_mel_bins must be positive (got ", cfg.n_enc_layer, ", ", cfg.n_enc_head, ", ", cfg.n_enc_ff, ", ",
                cfg.n_enc_ctx, ", ", cfg.n_mels, ")");
    BRISK_CHECK(d % cfg.n_enc_head == 0, "whisper config: d_model ", d, " is not divisible by ", cfg.n_enc_head,
                " encoder heads");
    BRISK_CHECK(cfg.n_enc_ctx <= (1 << 16) && cfg.n_mels <= 1024, "whisper config: max_source_positions ",
                cfg.n_enc_ctx, " / num_mel_bins ", cfg.n_mels, " out of range");
    act_ = activation_of(cfg.activation_function);
    enc_shape_ = {.n_embd = d, .n_head = cfg.n_enc_head, .n_head_kv = cfg.n_enc_head, .head_dim = d / cfg.n_enc_head};
    dec_shape_ = {.n_embd = d, .n_head = cfg.n_head, .n_head_kv = cfg.n_head_kv, .head_dim = cfg.head_dim};
    constexpr int kKernel = 3;
    conv1_ = ws.matrix_flat("enc.conv1.weight", int64_t(cfg.n_mels) * kKernel, d);
    conv1_bias_ = ws.vector("enc.conv1.bias", d);
    conv2_ = ws.matrix_flat("enc.conv2.weight", int64_t(d) * kKernel, d);
    conv2_bias_ = ws.vector("enc.conv2.bias", d);
    enc_pos_ = ws.matrix("enc.position_embd.weight", d, cfg.n_enc_ctx);
    enc_.resize(size_t(cfg.n_enc_layer));
    const AttentionLoadSpec biases{.qkv_bias = Need::optional, .out_bias = Need::required};
    for (int il = 0; il < cfg.n_enc_layer; ++il) {
      const std::string p = "enc.blk." + std::to_string(il) + ".";
      EncLayer& L = enc_[size_t(il)];
      L.attn_norm = layer_norm_load(ws, p + "attn_norm.", d);
      L.attn = attention_load(ws, p + "attn_", enc_shape_, biases);
      L.ffn_norm = layer_norm_load(ws, p + "ffn_norm.", d);
      L.ffn = ffn_load(ws, p + "ffn_", d, cfg.n_enc_ff);
    }
    enc_out_norm_ = layer_norm_load(ws, "enc.output_norm.", d);

    tok_embd_ = ws.matrix("token_embd.weight", d, cfg.n_vocab);
    dec_pos_ = ws.matrix("position_embd.weight", d, cfg.n_ctx_train);
    dec_.resize(size_t(cfg.n_layer));
    for (int il = 0; il < cfg.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      DecLayer& L = dec_[size_t(il)];
      L.attn_norm = layer_norm_load(ws, p + "attn_norm.", d);
      L.attn = attention_load(ws, p + "attn_", dec_shape_, biases);
      L.cross_norm = layer_norm_load(ws, p + "cross_attn_norm.", d);
      L.cross = attention_load(ws, p + "cross_attn_", dec_shape_, biases);
      L.ffn_norm = layer_norm_load(ws, p + "ffn_norm.", d);
      L.ffn = ffn_load(ws, p + "ffn_", d, cfg.n_ff);
    }
    out_norm_ = layer_norm_load(ws, "output_norm.", d);
    output_ = model_output_weight(cfg, ws);

    const int64_t n_frames = 2 * int64_t(cfg.n_enc_ctx), n_pos = cfg.n_enc_ctx;
    spec_ = {.n_frames = int32_t(n_frames), .n_features = cfg.n_mels, .n_pos = cfg.n_enc_ctx,
             .self_kv_width = enc_shape_.kv_width(), .self_head_dim = enc_shape_.head_dim,
             .cross_n_layer = cfg.n_layer, .cross_width = dec_shape_.kv_width(), .cross_head_dim = dec_shape_.head_dim,
             .cross_group = dec_shape_.n_head / dec_shape_.n_head_kv, .scratch_floats = 0};
    // Per window: im2col rows, conv1 output, x h t q k v attn, MLP hidden.
    cols_floats_ = std::max(n_frames * cfg.n_mels * kKernel, n_pos * d * kKernel);
    spec_.scratch_floats = cols_floats_ + n_frames * d + 7 * n_pos * d + n_pos * cfg.n_enc_ff;
  }

  const EncoderSpec* encoder() const override { return &spec_; }

  void encode(const EncoderForward& f) const override {
    const ModelConfig& cfg = f.cfg;
    const BlockContext c{.backend = f.backend, .tap = f.tap};
    const int64_t d = cfg.n_embd, n_frames = spec_.n_frames, n_pos = spec_.n_pos, wmax = f.arena.n_win_max;
    const int64_t rows_in = f.n_win * n_frames, rows = f.n_win * n_pos;
    float* s = f.arena.scratch;
    auto carve = [&](int64_t floats_per_window) {
      float* p = s;
      s += floats_per_window * wmax;
      return p;
    };
    float* cols = carve(cols_floats_);
    float* conv = carve(n_frames * d);
    auto mat = [&](int64_t cols_) { return Mat{.data = carve(n_pos * cols_), .rows = rows, .cols = cols_}; };
    const Mat x = mat(d), h = mat(d), t = mat(d), q = mat(d), k = mat(d), v = mat(d), attn = mat(d), hidden = mat(cfg.n_enc_ff);

    const Mat mel{.data = f.arena.in, .rows = rows_in, .cols = cfg.n_mels};
    const Mat conv1_out{.data = conv, .rows = rows_in, .cols = d};
    conv1d(c, {.out = conv1_out, .x = mel, .cols = Mat{.data = cols, .rows = rows_in, .cols = int64_t(cfg.n_mels) * 3},
               .w = conv1_, .bias = conv1_bias_, .frames_in = int32_t(n_frames), .kernel = 3, .stride = 1, .pad = 1,
               .gelu = true},
           "enc_conv1");
    conv1d(c, {.out = x, .x = conv1_out, .cols = Mat{.data = cols, .rows = rows, .cols = d * 3}, .w = conv2_,
               .bias = conv2_bias_, .frames_in = int32_t(n_frames), .kernel = 3, .stride = 2, .pad = 1, .gelu = true},
           "enc_conv2");
    f.backend.embedding({.out = h, .table = enc_pos_, .ids = f.pos});
    f.backend.add({.out = x, .a = x, .b = h});
    c.tap_tensor("enc_inp", -1, x);
    for (int il = 0; il < int(enc_.size()); ++il) {
      const EncLayer& L = enc_[size_t(il)];
      layer_norm(c, h, x, L.attn_norm, kLayerNormEps, "enc_attn_norm", il);
      full_attention(c, {.out = t, .x = h, .q = q, .k = k, .v = v, .attn = attn, .w = &L.attn, .shape = enc_shape_,
                         .k_cache = f.self_k, .v_cache = f.self_v, .seq = f.win, .pos = f.pos, .last_pos = f.last_pos,
                         .n_seq = f.n_win},
                     il);
      f.backend.add({.out = x, .a = x, .b = t});
      layer_norm(c, h, x, L.ffn_norm, kLayerNormEps, "enc_ffn_norm", il);
      ffn(c, {.out = t, .x = h, .hidden = hidden, .w = &L.ffn, .act = act_}, il);
      f.backend.add({.out = x, .a = x, .b = t});
      c.tap_tensor("enc_l_out", il, x);
    }
    layer_norm(c, h, x, enc_out_norm_, kLayerNormEps, "enc_out", -1);
    for (int il = 0; il < int(dec_.size()); ++il) {
      cross_kv_store(c, {.enc = h, .k = k, .v = v, .w = &dec_[size_t(il)].cross, .k_cache = f.cross_k[size_t(il)],
                         .v_cache = f.cross_v[size_t(il)], .seq = f.cross_seq, .pos = f.pos},
                     il);
    }
  }

  void forward(const Forward& f) const override {
    BRISK_CHECK(f.cross_k && f.cross_v && f.cross_pos, "whisper: a decoder forward needs the encoder's cross-attention state");
    const ModelConfig& cfg = f.cfg;
    const BlockContext c{.backend = f.backend, .tap = f.tap};
    Backend& be = f.backend;
    const Mat x = f.mat(f.arena.x, cfg.n_embd), h = f.mat(f.arena.h, cfg.n_embd), t = f.mat(f.arena.t, cfg.n_embd);
    // No scale_embedding factor: transformers computes it but never applies it.
    be.embedding({.out = x, .table = tok_embd_, .ids = f.batch.ids});
    be.embedding({.out = h, .table = dec_pos_, .ids = f.batch.pos});
    be.add({.out = x, .a = x, .b = h});
    f.tap_tensor("inp_embd", -1, x);
    const AttentionParams self{.rope = nullptr};
    for (int il = 0; il < int(dec_.size()); ++il) {
      const DecLayer& L = dec_[size_t(il)];
      layer_norm(c, h, x, L.attn_norm, kLayerNormEps, "attn_norm", il);
      residual_add(f, x, self_attention(f, h, L.attn, self, il), "ffn_inp", il);
      layer_norm(c, h, x, L.cross_norm, kLayerNormEps, "cross_attn_norm", il);
      cross_attention(c, {.out = t, .x = h, .q = f.mat(f.arena.q, cfg.q_width()), .attn = f.mat(f.arena.attn, cfg.q_width()),
                          .w = &L.cross, .shape = dec_shape_, .k_cache = (*f.cross_k)[size_t(il)],
                          .v_cache = (*f.cross_v)[size_t(il)], .seq = f.batch.seq, .last_pos = f.cross_pos,
                          .probe = f.cross_probe},
                      il);
      residual_add(f, x, t, "cross_out", il);
      layer_norm(c, h, x, L.ffn_norm, kLayerNormEps, "ffn_norm", il);
      ffn(c, {.out = t, .x = h, .hidden = f.mat(f.arena.gate, cfg.n_ff), .w = &L.ffn, .act = act_}, il);
      residual_add(f, x, t, "l_out", il);
    }
    if (f.batch.n_out == 0) return;
    BRISK_CHECK(f.batch.n_out <= f.arena.n_logits_max, "whisper: ", f.batch.n_out, " logit rows exceed the planned ",
                f.arena.n_logits_max);
    const Mat o{.data = f.arena.out, .rows = f.batch.n_out, .cols = cfg.n_embd};
    be.get_rows({.out = o, .x = x, .rows = f.batch.out_rows});
    layer_norm(c, o, o, out_norm_, kLayerNormEps, "result_norm", -1);
    const Mat logits{.data = f.arena.logits, .rows = f.batch.n_out, .cols = cfg.n_vocab};
    be.matmul({.out = logits, .x = o, .w = output_});
    f.tap_tensor("result_output", -1, logits);
  }

 private:
  EncoderSpec spec_;
  AttentionShape enc_shape_, dec_shape_;
  UnaryOp act_ = UnaryOp::gelu_erf;
  int64_t cols_floats_ = 0;         // im2col scratch per window
  Weight conv1_;                    // [d, n_mels * 3]
  const float* conv1_bias_ = nullptr;  // [d]
  Weight conv2_;                    // [d, d * 3]
  const float* conv2_bias_ = nullptr;  // [d]
  Weight enc_pos_;                  // [n_enc_ctx, d]
  std::vector<EncLayer> enc_;
  NormWeights enc_out_norm_;        // [d]
  Weight tok_embd_;                 // [n_vocab, d]
  Weight dec_pos_;                  // [n_dec_ctx, d]
  std::vector<DecLayer> dec_;
  NormWeights out_norm_;            // [d]
  Weight output_;                   // [n_vocab, d]
};

void sanitize(ModelConfig& c) {
  BRISK_CHECK(c.d_model > 0 && c.n_dec_layer > 0 && c.n_dec_head > 0 && c.n_dec_ff > 0 && c.n_dec_ctx > 0,
              "whisper config: d_model, decoder_layers, decoder_attention_heads, decoder_ffn_dim and "
              "max_target_positions must be positive");
  c.n_embd = c.d_model;
  c.n_layer = c.n_dec_layer;
  c.n_head = c.n_dec_head;
  c.n_head_kv = c.n_dec_head;
  c.head_dim = 0;
  c.n_ff = c.n_dec_ff;
  c.n_ctx_train = c.n_dec_ctx;
  c.hidden_act = "silu";  // unused: the MLPs take activation_function
  c.attn_scale = 0.0f;
  c.sliding_window = 0;
}

}  // namespace

const ArchEntry& arch_whisper() {
  static const ArchEntry e{
      .name = "whisper",
      .hf_architectures = {"WhisperForConditionalGeneration"},
      .hf_model_types = {"whisper"},
      .gguf_names = {"whisper"},
      .gguf_rope_neox = true,
      .hf_name_map = &whisper_name,
      .sanitize = &sanitize,
      .build = [](const ModelConfig& cfg, WeightStore& ws) -> std::unique_ptr<ArchModel> {
        return std::make_unique<Whisper>(cfg, ws);
      },
      .convert = {.arch = "whisper", .layout = GgufLayout::encoder_decoder},
  };
  return e;
}

}  // namespace brisk
