#include "runtime/prefix_cache.h"

#include <algorithm>

#include "core/error.h"

namespace brisk {
namespace {

uint64_t hash_mix(uint64_t h, uint64_t v) {
  // splitmix64 finalizer over (h, v): cheap and well distributed.
  uint64_t x = h ^ (v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return x;
}

uint64_t session_seed(std::string_view session) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a
  for (unsigned char c : session) h = (h ^ c) * 0x100000001B3ull;
  return hash_mix(h, session.size());
}

}  // namespace

PrefixCache::PrefixCache(int32_t n_slots, PrefixCacheOptions options)
    : options_(options), slots_(size_t(std::max(n_slots, 0))) {
  BRISK_CHECK(n_slots > 0, "prefix cache: need at least one slot, got ", n_slots);
  BRISK_CHECK(options_.block_size > 0, "prefix cache: block size must be positive, got ",
              options_.block_size);
}

std::vector<uint64_t> PrefixCache::chain(std::string_view session, const std::vector<int32_t>& tokens,
                                         size_t n_tokens, int32_t block_size) {
  n_tokens = std::min(n_tokens, tokens.size());
  const size_t n_blocks = n_tokens / size_t(block_size);
  std::vector<uint64_t> out(n_blocks);
  uint64_t h = session_seed(session);
  for (size_t b = 0; b < n_blocks; ++b) {
    for (size_t i = b * size_t(block_size); i < (b + 1) * size_t(block_size); ++i)
      h = hash_mix(h, uint32_t(tokens[i]));
    out[b] = h;
  }
  return out;
}

void PrefixCache::index_remove(int32_t slot) {
  for (uint64_t h : slots_[size_t(slot)].hashes) {
    auto it = index_.find(h);
    if (it == index_.end()) continue;
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), slot), v.end());
    if (v.empty()) index_.erase(it);
  }
}

void PrefixCache::index_add(int32_t slot) {
  Slot& s = slots_[size_t(slot)];
  s.hashes = chain(s.session, s.tokens, s.tokens.size(), options_.block_size);
  for (uint64_t h : s.hashes) index_[h].push_back(slot);
}

void PrefixCache::evict(int32_t slot) {
  Slot& s = slots_[size_t(slot)];
  index_remove(slot);
  if (s.state == SlotState::cached) cached_tokens_ -= int64_t(s.tokens.size());
  s = Slot{};
}

int32_t PrefixCache::lru_cached() const {
  int32_t best = -1;
  for (int32_t i = 0; i < n_slots(); ++i) {
    const Slot& s = slots_[size_t(i)];
    if (s.state != SlotState::cached) continue;
    if (best < 0 || s.last_used < slots_[size_t(best)].last_used) best = i;
  }
  return best;
}

int32_t PrefixCache::n_state(SlotState st) const {
  int32_t n = 0;
  for (const Slot& s : slots_) n += s.state == st;
  return n;
}

SlotPlan PrefixCache::acquire(std::string_view session, const std::vector<int32_t>& prompt,
                              int32_t max_reuse, const std::function<int32_t(int32_t, int32_t)>& restorable) {
  const size_t bs = size_t(options_.block_size);
  const size_t limit = size_t(std::clamp<int64_t>(max_reuse, 0, int64_t(prompt.size())));
  const std::vector<uint64_t> want = chain(session, prompt, limit, options_.block_size);

  // Deepest level of the chain that some slot of this session holds.
  std::vector<int32_t> candidates;
  size_t depth = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    auto it = index_.find(want[i]);
    if (it == index_.end()) break;
    std::vector<int32_t> level;
    for (int32_t s : it->second) {
      const Slot& slot = slots_[size_t(s)];
      if (slot.state != SlotState::free && slot.session == session && slot.hashes.size() > i &&
          slot.hashes[i] == want[i])
        level.push_back(s);
    }
    if (level.empty()) break;
    candidates = std::move(level);
    depth = i + 1;
  }
  // Confirm token by token (hash collisions); the deepest point each slot can be restored to
  // wins, then an idle cached slot.
  int32_t best = -1, best_reuse = 0;
  for (int32_t s : candidates) {
    const Slot& slot = slots_[size_t(s)];
    if (slot.tokens.size() < depth * bs ||
        !std::equal(prompt.begin(), prompt.begin() + long(depth * bs), slot.tokens.begin()))
      continue;
    const int32_t r = restorable ? std::min(restorable(s, int32_t(depth * bs)), int32_t(depth * bs))
                                 : int32_t(depth * bs);
    if (r <= 0) continue;
    if (best < 0 || r > best_reuse ||
        (r == best_reuse && slot.state == SlotState::cached && slots_[size_t(best)].state != SlotState::cached)) {
      best = s;
      best_reuse = r;
    }
  }
  const int32_t reuse = best >= 0 ? best_reuse : 0;

  SlotPlan plan;
  if (best >= 0 && slots_[size_t(best)].state == SlotState::cached) {
    plan.slot = best;
    plan.reuse_tokens = reuse;
    cached_tokens_ -= int64_t(slots_[size_t(best)].tokens.size());
  } else {
    for (int32_t i = 0; i < n_slots() && plan.slot < 0; ++i)
      if (slots_[size_t(i)].state == SlotState::free) plan.slot = i;
    if (plan.slot < 0) {
      plan.slot = lru_cached();
      if (plan.slot < 0) return SlotPlan{};  // everything is active: wait
      evict(plan.slot);
      plan.evicted.push_back(plan.slot);
    }
    if (best >= 0 && reuse > 0) {
      plan.copy_from = best;
      plan.reuse_tokens = reuse;
    }
  }
  Slot& s = slots_[size_t(plan.slot)];
  index_remove(plan.slot);
  s.state = SlotState::active;
  s.session = std::string(session);
  s.tokens.assign(prompt.begin(), prompt.begin() + plan.reuse_tokens);
  s.last_used = ++clock_;
  index_add(plan.slot);
  return plan;
}

void PrefixCache::update(int32_t slot, const std::vector<int32_t>& tokens) {
  Slot& s = slots_.at(size_t(slot));
  BRISK_CHECK(s.state == SlotState::active, "prefix cache: update of slot ", slot, " that is not active");
  index_remove(slot);
  s.tokens = tokens;
  index_add(slot);
}

std::vector<int32_t> PrefixCache::release_cached(int32_t slot, const std::vector<int32_t>& tokens) {
  Slot& s = slots_.at(size_t(slot));
  BRISK_CHECK(s.state == SlotState::active, "prefix cache: release of slot ", slot, " that is not active");
  std::vector<int32_t> evicted;
  index_remove(slot);
  s.tokens = tokens;
  s.last_used = ++clock_;
  if (tokens.empty()) {
    s = Slot{};
    return evicted;
  }
  s.state = SlotState::cached;
  cached_tokens_ += int64_t(tokens.size());
  index_add(slot);
  while (options_.cached_token_budget >= 0 && cached_tokens_ > options_.cached_token_budget) {
    const int32_t victim = lru_cached();
    if (victim < 0) break;
    evict(victim);
    evicted.push_back(victim);
  }
  return evicted;
}

void PrefixCache::release_free(int32_t slot) {
  Slot& s = slots_.at(size_t(slot));
  index_remove(slot);
  if (s.state == SlotState::cached) cached_tokens_ -= int64_t(s.tokens.size());
  s = Slot{};
}

std::vector<int32_t> PrefixCache::clear_cached() {
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n_slots(); ++i)
    if (slots_[size_t(i)].state == SlotState::cached) {
      evict(i);
      out.push_back(i);
    }
  return out;
}

}  // namespace brisk
