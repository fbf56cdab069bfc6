// The number of KV splits of the split attention kernel (attention_split.cu), a host function of
// shapes only, so that tests check it without a device.
#pragma once
#include <cstdint>

namespace brisk::cuda {

// The split kernel's number of KV splits (attention_split.cu): a function of the shapes, the
// cache capacity (or window) and the device's multiprocessors only. A token's output depends on
// it (each split sums its own chunk), so steps of up to kAttnSplitAsOneToken tokens (decode
// batches, speculative verify groups) take the splits of a one-token step: each of their rows
// is then computed as decoding that token alone computes it.
constexpr int64_t kAttnSplitAsOneToken = 8;
struct AttnSplitShape {
  int64_t n_tok;       // rows of the launch
  int64_t n_head_kv;
  int64_t n_hg;        // head groups per KV head
  int64_t capacity;    // KV positions per sequence
  int64_t window;      // sliding window (0: none)
  int64_t sm_count;    // multiprocessors of the device
  bool fine = true;    // chunks of 16 positions allowed (not BRISK_NO_CUDA_FINE_SPLITS)
};
int attention_split_count(const AttnSplitShape& s);

}  // namespace brisk::cuda
