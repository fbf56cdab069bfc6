// The per-sequence state of encoder-decoder models, as the model declares it (EncoderSpec):
// each sequence's cross-attention cache (per decoder layer, the keys and values of one encoder
// window, written once by encode() and read by every decoder step of that sequence), plus
// what an encoder pass needs: an input buffer, the model's scratch arena and a scratch KV view
// for the encoder's bidirectional self-attention, all planned once for n_win_max windows.
//
// The cross-attention caches are a paged KvCache (runtime/kv_cache.h) whose per-sequence
// length is the window rounded up to whole blocks, so that seq_copy (beams of one window)
// shares every block instead of copying any. Nothing here names an architecture.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "models/encoder_forward.h"
#include "models/registry.h"
#include "runtime/engine_api.h"
#include "runtime/kv_cache.h"

namespace brisk {

struct EncoderStateOptions {
  int32_t n_seq = 1;              // sequences with a cross-attention cache
  int32_t n_win_max = 1;          // windows per encoder pass
  int32_t n_tok_max = 1;          // decoder tokens per forward (cross positions, probes)
  QuantType kv_type = QuantType::F16;
  int32_t block_size = 256;
};

class EncoderState {
 public:
  EncoderState(Backend& backend, const ArchModel& arch, const ModelConfig& cfg, const EncoderStateOptions& o);
  ~EncoderState();
  EncoderState(const EncoderState&) = delete;
  EncoderState& operator=(const EncoderState&) = delete;

  const EncoderSpec& spec() const { return spec_; }
  // Runs the encoder over the inputs (in passes of n_win_max windows); each input's sequence
  // then holds that window's cross-attention state.
  void encode(const std::vector<EncoderInput>& inputs, const TapFn* tap);
  bool holds(int32_t seq) const { return cross_->length(seq) > 0; }
  // dst := src's state (shared blocks); src without state clears dst.
  void copy(int32_t src, int32_t dst);
  void clear(int32_t seq) { cross_->truncate(seq, 0); }
  // Before a decoder forward: the block table on the device.
  void prepare();

  const std::vector<KvView>& cross_k() const { return cross_->k(); }
  const std::vector<KvView>& cross_v() const { return cross_->v(); }
  // [n_tok_max], each n_pos - 1, in backend memory: written once, so a device backend reads it
  // in place and a decoder step that reads it can replay as the previous step's graph.
  const int32_t* cross_pos() const { return cross_pos_; }

  // Cross-attention probabilities of the next decoder forward (one-shot): the model records
  // these (layer, head) pairs; results() is [heads, n_tok, n_pos] after that forward.
  void set_probe(std::vector<std::pair<int32_t, int32_t>> heads);
  // The probe of the forward about to run over n_tok tokens (nullptr when none was asked).
  const CrossAttentionProbe* take_probe(int32_t n_tok);
  const float* probe_result(int32_t i, int32_t n_tok) const;
  bool probe_pending() const { return !probe_heads_.empty(); }

 private:
  Backend& backend_;
  const ArchModel& arch_;
  const ModelConfig& cfg_;
  EncoderSpec spec_;
  EncoderStateOptions opt_;
  int32_t cross_len_ = 0;                 // n_pos rounded up to whole blocks
  std::unique_ptr<KvCache> cross_;        // [cross_n_layer] x [n_seq, cross_len_, cross_width]
  std::unique_ptr<KvCache> self_;         // [1] x [n_win_max, n_pos, self_kv_width]
  EncoderArena arena_;
  std::vector<int32_t> pos_, last_pos_, win_, cross_seq_;  // [n_win_max * n_pos]
  int32_t* cross_pos_ = nullptr;          // [n_tok_max] backend memory
  std::vector<std::pair<int32_t, int32_t>> probe_heads_;
  CrossAttentionProbe probe_;
  std::vector<float> probe_out_;          // [heads, n_tok, n_pos]
  int64_t probe_scratch_floats_ = 0;
};

}  // namespace brisk
