// Prefix cache: which KV sequence slot already holds the longest prefix of a new prompt.
//
// The KV of every slot is viewed as fixed-size token blocks. Block i is identified by a hash
// chain: h[i] = hash(h[i-1], tokens of block i), with h[-1] = hash(session key). Equal chain
// hashes therefore mean equal whole prefixes under the same session key, so two session keys
// never share a block. A lookup walks the prompt's chain through an index
// (chain hash -> slots holding it) and stops at the first block no slot holds; candidate
// matches are confirmed token by token, so a hash collision can never reuse the wrong KV.
//
// Slots are free (empty KV), active (a request runs in them) or cached (idle, KV kept for
// reuse). Cached slots are evicted least recently used first when their total token count
// exceeds the budget, or when a new request needs a slot and none is free.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace brisk {

struct PrefixCacheOptions {
  int32_t block_size = 16;          // tokens per block (match granularity)
  int64_t cached_token_budget = -1;  // max tokens held by idle slots; < 0: unbounded
};

enum class SlotState { free, active, cached };

// Where a new request should run and what it can reuse.
struct SlotPlan {
  int32_t slot = -1;          // -1: no slot available now (all active)
  int32_t reuse_tokens = 0;   // prompt tokens already in KV (whole blocks)
  int32_t copy_from = -1;     // >= 0: copy reuse_tokens positions from this slot first
  std::vector<int32_t> evicted;  // cached slots emptied to make room (their KV must be cleared)
};

class PrefixCache {
 public:
  PrefixCache(int32_t n_slots, PrefixCacheOptions options);

  // Chooses a slot for a prompt of `session` and marks it active. At most `max_reuse` tokens
  // are reused (a request must decode at least its last prompt token). `restorable(slot, n)`,
  // when given, is the largest m <= n to which that slot's sequence can be cut back exactly
  // (Context::seq_restorable: a model with recurrent state knows it at snapshots only); the
  // reuse is the deepest such point among the matching slots.
  SlotPlan acquire(std::string_view session, const std::vector<int32_t>& prompt, int32_t max_reuse,
                   const std::function<int32_t(int32_t slot, int32_t n)>& restorable = nullptr);

  // The KV of an active slot now holds exactly `tokens` (prefix registered for sharing).
  void update(int32_t slot, const std::vector<int32_t>& tokens);
  // Request finished: keep its KV (`tokens`) as a cache entry. Returns slots evicted to stay
  // within the budget (possibly this one); their KV must be cleared.
  std::vector<int32_t> release_cached(int32_t slot, const std::vector<int32_t>& tokens);
  // Request ended without keeping its KV (cancelled or failed): the slot becomes free.
  void release_free(int32_t slot);
  // Drops every cache entry (e.g. on shutdown). Returns the slots to clear.
  std::vector<int32_t> clear_cached();

  SlotState state(int32_t slot) const { return slots_.at(size_t(slot)).state; }
  int32_t n_slots() const { return int32_t(slots_.size()); }
  int32_t block_size() const { return options_.block_size; }
  int64_t cached_tokens() const { return cached_tokens_; }
  int32_t n_state(SlotState s) const;

  // Chain hashes of the whole blocks in tokens[0, n_tokens).
  static std::vector<uint64_t> chain(std::string_view session, const std::vector<int32_t>& tokens,
                                     size_t n_tokens, int32_t block_size);

 private:
  struct Slot {
    SlotState state = SlotState::free;
    std::string session;
    std::vector<int32_t> tokens;
    std::vector<uint64_t> hashes;  // chain hashes of tokens' whole blocks
    uint64_t last_used = 0;
  };
  void index_remove(int32_t slot);
  void index_add(int32_t slot);
  void evict(int32_t slot);
  int32_t lru_cached() const;

  PrefixCacheOptions options_;
  std::vector<Slot> slots_;
  std::unordered_map<uint64_t, std::vector<int32_t>> index_;  // chain hash -> slots
  uint64_t clock_ = 0;
  int64_t cached_tokens_ = 0;
};

}  // namespace brisk
