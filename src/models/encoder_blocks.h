// Shared blocks of encoder and encoder-decoder models (speech encoders, BERT-like encoders,
// the decoders that attend to an encoder), written once against the Backend ops:
//   layer_norm        LayerNorm with weight and bias
//   ffn               up (+ bias) -> GELU -> down (+ bias), the non-gated transformer MLP
//   conv1d            1-D convolution as im2col + one batched matmul, optionally + GELU
//   full_attention    bidirectional self-attention: every position sees every position of its
//                     window or packed sequence, or those within a local window (attention_dense;
//                     else keys and values go through a scratch KV view and the attention op gets
//                     the last position as every query's position); rotary positions optional;
//                     without them the q / k / v biases go into the attention's reads where the
//                     backend takes them there (Backend::attention_dense_bias)
//   gated_ffn         down(act(gate(x)) * up(x)) (SwiGLU / GeGLU), gate and up apart or fused in
//                     one matrix (gate rows first)
//   cross_kv_store    a decoder layer's cross-attention keys / values of the encoder output,
//                     stored once per window into the sequence's cross-attention cache
//   cross_attention   a decoder layer's queries against that cache
// Tensor names follow the GGUF convention of models/name_map.h with a prefix per block.
#pragma once
#include <string>

#include "models/blocks.h"
#include "models/encoder_forward.h"

namespace brisk {

// Where a block's ops run and report their intermediates (Forward / EncoderForward give one).
struct BlockContext {
  Backend& backend;
  const TapFn* tap = nullptr;
  void tap_tensor(const char* name, int layer, const Mat& m) const {
    if (tap && *tap) {
      backend.synchronize();
      (*tap)(name, layer, m);
    }
  }
};

// Successive [rows, cols] matrices of a forward's scratch arena: mat(cols) takes the next one.
struct EmbedScratch {
  float* next = nullptr;
  int64_t rows = 0;
  Mat operator()(int64_t cols) {
    const Mat m{.data = next, .rows = rows, .cols = cols};
    next += rows * cols;
    return m;
  }
};

struct NormWeights {
  const float* weight = nullptr;  // [n]
  const float* bias = nullptr;    // [n]
};

struct FfnWeights {
  Weight up{};                    // [n_ff, n_embd]
  const float* up_bias = nullptr; // [n_ff]
  Weight down{};                  // [n_embd, n_ff]
  const float* down_bias = nullptr;  // [n_embd]
};

struct AttentionShape {
  int32_t n_embd = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t q_width() const { return n_head * head_dim; }
  int32_t kv_width() const { return n_head_kv * head_dim; }
};

// prefix + "weight" / "bias", both [n].
NormWeights layer_norm_load(WeightStore& ws, const std::string& prefix, int64_t n);
// prefix + "up.weight" / "up.bias" / "down.weight" / "down.bias".
FfnWeights ffn_load(WeightStore& ws, const std::string& prefix, int64_t n_embd, int64_t n_ff);
// prefix + "q" / "k" / "v" / "output", each ".weight" and, as the spec says, ".bias".
AttentionWeights attention_load(WeightStore& ws, const std::string& prefix, const AttentionShape& s,
                                const AttentionLoadSpec& spec);

// A layer's attention weights under prefix ("blk.N."): attn_q / attn_k / attn_v, or fused
// attn_qkv ([q_width + 2 kv_width, n_embd]: all q rows, then k, then v; split once here, and its
// bias attn_qkv.bias likewise), and attn_output; biases as `bias` says (optional: where present).
AttentionWeights encoder_attention_load(WeightStore& ws, const std::string& prefix, const AttentionShape& s, Need bias);

// out := layer_norm(x) * w + b.
void layer_norm(const BlockContext& c, const Mat& out, const Mat& x, const NormWeights& w, float eps,
                const char* name, int il);

struct FfnArgs {
  Mat out{};                      // [n, n_embd]
  Mat x{};                        // [n, n_embd]
  Mat hidden{};                   // scratch [n, n_ff]
  const FfnWeights* w = nullptr;
  UnaryOp act = UnaryOp::gelu_erf;
};
void ffn(const BlockContext& c, const FfnArgs& a, int il);

struct GatedFfnWeights {
  Weight gate{};                  // [n_ff, n_embd], or empty when up holds both
  Weight up{};                    // [n_ff, n_embd], or fused [2 n_ff, n_embd]: the gate's rows, then up's
  Weight down{};                  // [n_embd, n_ff]
};

struct GatedFfnArgs {
  Mat out{};                      // [n, n_embd]
  Mat x{};                        // [n, n_embd]
  Mat hidden{};                   // scratch [n, 2 n_ff]
  const GatedFfnWeights* w = nullptr;
  Activation act = Activation::silu;
};
void gated_ffn(const BlockContext& c, const GatedFfnArgs& a, int il);

struct Conv1dArgs {
  Mat out{};                      // [n_seq * frames_out, n_out]
  Mat x{};                        // [n_seq * frames_in, n_in_channels]
  Mat cols{};                     // scratch [n_seq * frames_out, n_in_channels * kernel]
  Weight w{};                     // [n_out, n_in_channels * kernel]
  const float* bias = nullptr;    // [n_out]
  int32_t frames_in = 0, kernel = 1, stride = 1, pad = 0;
  bool gelu = false;              // GELU (erf) after the bias
};
void conv1d(const BlockContext& c, const Conv1dArgs& a, const char* name);

struct FullAttentionArgs {
  Mat out{};                      // [n, n_embd]
  Mat x{};                        // [n, n_embd] (normed input)
  Mat q{}, k{}, v{}, attn{};          // scratch [n, q_width] / [n, kv_width] x2 / [n, q_width]
  const AttentionWeights* w = nullptr;
  AttentionShape shape{};
  KvView k_cache{}, v_cache{};    // scratch views of [n_seq, n_pos, kv_width]
  const int32_t* seq = nullptr;   // [n] sequence (window) of each row
  const int32_t* pos = nullptr;   // [n] its position in the window
  const int32_t* last_pos = nullptr;  // [n] the window's last position
  int32_t n_seq = 1;              // windows in the rows (n / n_seq positions each, unless seq_start)
  // Host [n_seq + 1]: packed sequences of different lengths, sequence s at rows
  // [seq_start[s], seq_start[s + 1]); then the backend must have attention_dense (no KV fallback).
  const int32_t* seq_start = nullptr;
  const RopeTable* rope = nullptr;    // rotary positions on q and k (nullptr: none)
  const int32_t* rope_pos = nullptr;  // [n] the position of each row in its sequence (with rope)
  int32_t window = 0;             // > 0: keys at most `window` positions before or after (attention_dense only)
};
void full_attention(const BlockContext& c, const FullAttentionArgs& a, int il);

struct CrossKvStoreArgs {
  Mat enc{};                      // [n, n_embd_enc] encoder output
  Mat k{}, v{};                   // scratch [n, kv_width]
  const AttentionWeights* w = nullptr;  // wk, wv (+ bk, bv)
  KvView k_cache{}, v_cache{};    // the layer's cross-attention cache
  const int32_t* seq = nullptr;   // [n] decoder sequence of each row
  const int32_t* pos = nullptr;   // [n] encoder position of each row
};
void cross_kv_store(const BlockContext& c, const CrossKvStoreArgs& a, int il);

struct CrossAttentionArgs {
  Mat out{};                      // [n_tok, n_embd]
  Mat x{};                        // [n_tok, n_embd] (normed decoder input)
  Mat q{}, attn{};                // scratch [n_tok, q_width]
  const AttentionWeights* w = nullptr;  // wq, wo (+ bq, bo)
  AttentionShape shape{};
  KvView k_cache{}, v_cache{};    // the layer's cross-attention cache
  const int32_t* seq = nullptr;   // [n_tok]
  const int32_t* last_pos = nullptr;  // [n_tok] the last encoder position
  const CrossAttentionProbe* probe = nullptr;  // record these heads' probabilities (may be nullptr)
};
void cross_attention(const BlockContext& c, const CrossAttentionArgs& a, int il);

}  // namespace brisk
