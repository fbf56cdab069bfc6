#include "runtime/encoder_state.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace brisk {

EncoderState::EncoderState(Backend& backend, const ArchModel& arch, const ModelConfig& cfg, const EncoderStateOptions& o)
    : backend_(backend), arch_(arch), cfg_(cfg), spec_(*arch.encoder()), opt_(o) {
  BRISK_CHECK(spec_.n_frames > 0 && spec_.n_features > 0 && spec_.n_pos > 0 && spec_.cross_n_layer > 0 &&
                  spec_.cross_width > 0 && spec_.self_kv_width > 0 && spec_.scratch_floats > 0,
              "encoder: the model declares an empty encoder shape");
  BRISK_CHECK(o.n_seq >= 1 && o.n_win_max >= 1 && o.n_win_max <= 64 && o.n_tok_max >= 1, "encoder: bad options");
  const int32_t bs = o.block_size;
  cross_len_ = (spec_.n_pos + bs - 1) / bs * bs;
  const bool tiled_cross = backend.wants_tiled_k(o.kv_type, spec_.cross_head_dim, spec_.cross_group);
  // The pool starts at one block per sequence and grows as windows are encoded (beams share a
  // window's blocks); the views' capacity is the whole window from the start.
  cross_ = std::make_unique<KvCache>(backend, KvCacheOptions{.n_layer = spec_.cross_n_layer, .width = spec_.cross_width,
                                                             .n_seq = o.n_seq, .n_ctx = cross_len_, .type = o.kv_type,
                                                             .initial_capacity = bs, .block_size = bs,
                                                             .tiled_k = tiled_cross});
  cross_->reserve(cross_len_);
  const bool tiled_self = backend.wants_tiled_k(o.kv_type, spec_.self_head_dim, 1);
  self_ = std::make_unique<KvCache>(backend, KvCacheOptions{.n_layer = 1, .width = spec_.self_kv_width,
                                                            .n_seq = o.n_win_max, .n_ctx = spec_.n_pos,
                                                            .type = o.kv_type, .initial_capacity = spec_.n_pos,
                                                            .block_size = bs, .tiled_k = tiled_self});
  self_->prepare(std::vector<int32_t>(size_t(o.n_win_max), spec_.n_pos));
  for (int32_t w = 0; w < o.n_win_max; ++w) self_->set_length(w, spec_.n_pos);

  arena_.n_win_max = o.n_win_max;
  arena_.in = static_cast<float*>(
      backend.alloc(sizeof(float) * size_t(o.n_win_max) * size_t(spec_.n_frames) * size_t(spec_.n_features)));
  arena_.scratch = static_cast<float*>(backend.alloc(sizeof(float) * size_t(o.n_win_max) * size_t(spec_.scratch_floats)));
  const size_t rows = size_t(o.n_win_max) * size_t(spec_.n_pos);
  pos_.resize(rows);
  last_pos_.assign(rows, spec_.n_pos - 1);
  win_.resize(rows);
  cross_seq_.resize(rows);
  for (size_t r = 0; r < rows; ++r) {
    pos_[r] = int32_t(r % size_t(spec_.n_pos));
    win_[r] = int32_t(r / size_t(spec_.n_pos));
  }
  const std::vector<int32_t> last(size_t(o.n_tok_max), spec_.n_pos - 1);
  cross_pos_ = static_cast<int32_t*>(backend.alloc(sizeof(int32_t) * last.size()));
  backend.copy(cross_pos_, last.data(), sizeof(int32_t) * last.size());
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double cross_bytes = 2.0 * spec_.cross_n_layer * double(o.n_seq) * cross_len_ * cross_->options().width *
                             (o.kv_type == QuantType::F32 ? 4.0 : 2.0);
  log_info(backend.name(), " encoder: cross-attention caches up to ", cross_bytes / gib, " GiB (", o.n_seq,
           " seq), arena ", (4.0 * o.n_win_max * (double(spec_.scratch_floats) + double(spec_.n_frames) * spec_.n_features)) / gib,
           " GiB (", o.n_win_max, " windows per pass)");
}

EncoderState::~EncoderState() {
  backend_.free(arena_.in);
  backend_.free(arena_.scratch);
  backend_.free(cross_pos_);
  if (probe_.device_scratch) backend_.free(probe_.device_scratch);
}

void EncoderState::encode(const std::vector<EncoderInput>& inputs, const TapFn* tap) {
  for (const EncoderInput& in : inputs) {
    BRISK_CHECK(in.seq >= 0 && in.seq < opt_.n_seq, "encode: sequence ", in.seq, " out of range [0, ", opt_.n_seq, ")");
    BRISK_CHECK(in.features != nullptr, "encode: sequence ", in.seq, " has no features");
  }
  const size_t window_floats = size_t(spec_.n_frames) * size_t(spec_.n_features);
  for (size_t start = 0; start < inputs.size(); start += size_t(opt_.n_win_max)) {
    const int32_t n_win = int32_t(std::min(inputs.size() - start, size_t(opt_.n_win_max)));
    std::vector<int32_t> len(static_cast<size_t>(opt_.n_seq));
    for (int32_t s = 0; s < opt_.n_seq; ++s) len[size_t(s)] = cross_->length(s);
    for (int32_t w = 0; w < n_win; ++w) {
      const EncoderInput& in = inputs[start + size_t(w)];
      backend_.copy(arena_.in + size_t(w) * window_floats, in.features, sizeof(float) * window_floats);
      cross_->truncate(in.seq, 0);  // fresh blocks: beams sharing the old window keep theirs
      len[size_t(in.seq)] = cross_len_;
      std::fill(cross_seq_.begin() + int64_t(w) * spec_.n_pos, cross_seq_.begin() + int64_t(w + 1) * spec_.n_pos, in.seq);
    }
    cross_->prepare(len);
    const EncoderForward f{.backend = backend_, .cfg = cfg_, .spec = spec_, .n_win = n_win, .arena = arena_,
                           .pos = pos_.data(), .last_pos = last_pos_.data(), .win = win_.data(),
                           .cross_seq = cross_seq_.data(), .self_k = self_->k()[0], .self_v = self_->v()[0],
                           .cross_k = cross_->k(), .cross_v = cross_->v(), .tap = tap};
    arch_.encode(f);
    backend_.synchronize();
    for (int32_t w = 0; w < n_win; ++w) cross_->set_length(inputs[start + size_t(w)].seq, cross_len_);
  }
}

void EncoderState::copy(int32_t src, int32_t dst) {
  if (src == dst) return;
  if (cross_->length(src) == 0) {
    cross_->truncate(dst, 0);
    return;
  }
  cross_->copy(src, dst, cross_->length(src));
}

void EncoderState::prepare() {
  std::vector<int32_t> len(static_cast<size_t>(opt_.n_seq));
  for (int32_t s = 0; s < opt_.n_seq; ++s) len[size_t(s)] = cross_->length(s);
  cross_->prepare(len);
}

void EncoderState::set_probe(std::vector<std::pair<int32_t, int32_t>> heads) {
  for (const auto& [layer, head] : heads)
    BRISK_CHECK(layer >= 0 && layer < spec_.cross_n_layer && head >= 0 && head < cfg_.n_head,
                "cross-attention probe: (layer ", layer, ", head ", head, ") outside the model's ",
                spec_.cross_n_layer, " layers x ", cfg_.n_head, " heads");
  probe_heads_ = std::move(heads);
}

const CrossAttentionProbe* EncoderState::take_probe(int32_t n_tok) {
  if (probe_heads_.empty()) return nullptr;
  BRISK_CHECK(n_tok <= opt_.n_tok_max, "cross-attention probe: ", n_tok, " tokens exceed the batch of ", opt_.n_tok_max);
  const int64_t need = int64_t(n_tok) * spec_.n_pos;
  if (need > probe_scratch_floats_) {
    if (probe_.device_scratch) backend_.free(probe_.device_scratch);
    probe_.device_scratch = static_cast<float*>(backend_.alloc(sizeof(float) * size_t(need)));
    probe_scratch_floats_ = need;
  }
  probe_out_.assign(probe_heads_.size() * size_t(need), 0.0f);
  probe_.heads = std::move(probe_heads_);
  probe_heads_.clear();
  probe_.out = probe_out_.data();
  probe_.n_pos = spec_.n_pos;
  return &probe_;
}

const float* EncoderState::probe_result(int32_t i, int32_t n_tok) const {
  BRISK_CHECK(i >= 0 && size_t(i) < probe_.heads.size() && !probe_out_.empty(), "cross-attention probe ", i,
              " was not recorded");
  return probe_out_.data() + size_t(i) * size_t(n_tok) * size_t(spec_.n_pos);
}

}  // namespace brisk
