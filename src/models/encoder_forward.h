// What the encoder of an encoder-decoder model declares and works with. The model declares
// its shape (EncoderSpec); the runtime (runtime/encoder_state.h) owns the per-sequence
// cross-attention caches it fills, a scratch KV view for its bidirectional self-attention and
// an arena, all planned once per Context, and hands them over in an EncoderForward. A window
// of input frames (e.g. 3000 log-mel frames of 30 s) becomes n_pos encoder positions, whose
// per-decoder-layer keys and values are stored once into the sequence's cross-attention cache;
// every decoder step of that sequence then attends to all of them.
#pragma once
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "models/forward.h"

namespace brisk {

struct EncoderSpec {
  int32_t n_frames = 0;          // input rows per window (log-mel frames)
  int32_t n_features = 0;        // input columns (mel bins)
  int32_t n_pos = 0;             // encoder output positions per window
  int32_t self_kv_width = 0;     // n_head * head_dim of the encoder's self-attention
  int32_t self_head_dim = 0;
  int32_t cross_n_layer = 0;     // decoder layers with a cross-attention cache
  int32_t cross_width = 0;       // n_head_kv * head_dim of the decoder's cross-attention
  int32_t cross_head_dim = 0;
  int32_t cross_group = 1;       // query heads per KV head of the cross-attention
  int64_t scratch_floats = 0;    // arena floats the encoder needs per window
};

// Encoder inputs and state for one encoder pass over n_win windows.
struct EncoderArena {
  int32_t n_win_max = 0;
  float* in = nullptr;           // [n_win_max * n_frames, n_features], filled before encode()
  float* scratch = nullptr;      // [n_win_max * scratch_floats] for the model to carve up
};

struct EncoderForward {
  Backend& backend;
  const ModelConfig& cfg;
  const EncoderSpec& spec;
  int32_t n_win = 0;                   // windows in this pass (<= arena.n_win_max)
  const EncoderArena& arena;
  // Per encoder position r = w * n_pos + t (window w, position t), host arrays [n_win * n_pos]:
  const int32_t* pos = nullptr;        // t
  const int32_t* last_pos = nullptr;   // n_pos - 1 (bidirectional attention: every position visible)
  const int32_t* win = nullptr;        // w: the sequence of the scratch self-attention view
  const int32_t* cross_seq = nullptr;  // the decoder sequence whose cross-attention cache window w fills
  KvView self_k{};                     // scratch [n_win_max, n_pos, self_kv_width], rewritten per layer
  KvView self_v{};
  const std::vector<KvView>& cross_k;  // [cross_n_layer] views of [n_seq, n_pos, cross_width]
  const std::vector<KvView>& cross_v;
  const TapFn* tap = nullptr;

  void tap_tensor(const char* name, int layer, const Mat& m) const {
    if (tap && *tap) {
      backend.synchronize();
      (*tap)(name, layer, m);
    }
  }
};

// Cross-attention probabilities a decoder forward records for alignment (word timestamps):
// for each (layer, head) pair i, out + i * n_tok * n_pos holds [n_tok, n_pos], one row per
// batch token (host memory; the model copies them there).
struct CrossAttentionProbe {
  std::vector<std::pair<int32_t, int32_t>> heads{};  // (decoder layer, query head)
  float* out = nullptr;
  float* device_scratch = nullptr;                 // [n_tok, n_pos] in backend memory
  int64_t n_pos = 0;
};

}  // namespace brisk
