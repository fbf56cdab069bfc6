#include "runtime/recurrent_state.h"

#include <algorithm>

#include "core/checked_math.h"
#include "core/error.h"

namespace brisk {

RecurrentState::RecurrentState(Backend& backend, const RecurrentStateOptions& opt) : backend_(backend), opt_(opt) {
  BRISK_CHECK(opt.n_seq > 0 && opt.snapshots_per_seq >= 0 && opt.snapshots_per_seq <= 64,
              "recurrent state: ", opt.n_seq, " sequences and ", opt.snapshots_per_seq,
              " snapshots per sequence out of range");
  const auto slots = checked_mul<int64_t>(int64_t(opt.n_seq), int64_t(1 + opt.snapshots_per_seq + (opt.checkpoints ? 1 : 0)));
  BRISK_CHECK(slots && *slots < (int64_t(1) << 20), "recurrent state: too many slots");
  n_slots_ = int32_t(*slots);
  for (const auto& layer : opt.layers) {
    auto& bufs = buffers_.emplace_back();
    auto& views = views_.emplace_back();
    for (int64_t floats : layer) {
      BRISK_CHECK(floats > 0, "recurrent state: a layer declares a tensor of ", floats, " floats");
      const auto bytes = checked_mul<uint64_t>(uint64_t(floats) * sizeof(float), uint64_t(n_slots_));
      BRISK_CHECK(bytes && *bytes < (uint64_t(1) << 46), "recurrent state: size overflows");
      bufs.push_back(backend_.alloc(size_t(*bytes)));
      views.push_back(StateView{.data = static_cast<float*>(bufs.back()), .slot_floats = floats, .n_slots = n_slots_});
      slot_bytes_ += size_t(floats) * sizeof(float);
    }
  }
  snapshots_.resize(size_t(opt.n_seq));
  for (int32_t s = opt.n_seq * (1 + opt.snapshots_per_seq) - 1; s >= opt.n_seq; --s) free_slots_.push_back(s);
  checkpoint_pos_.assign(size_t(opt.n_seq), -1);
}

RecurrentState::~RecurrentState() {
  for (auto& bufs : buffers_)
    for (void* p : bufs) backend_.free(p);
}

int32_t RecurrentState::n_snapshots() const {
  int32_t n = 0;
  for (const auto& v : snapshots_) n += int32_t(v.size());
  return n;
}

void RecurrentState::copy_slot(int32_t dst, int32_t src) {
  if (dst == src) return;
  for (const auto& layer : views_)
    for (const StateView& v : layer)
      backend_.copy(v.slot(dst), v.slot(src), size_t(v.slot_floats) * sizeof(float));
}

const RecurrentState::Snapshot* RecurrentState::find(int32_t seq, int32_t pos) const {
  for (const Snapshot& s : snapshots_[size_t(seq)])
    if (s.pos == pos) return &s;
  return nullptr;
}

bool RecurrentState::checkpoint(int32_t seq, int32_t pos) {
  if (!opt_.checkpoints) return false;
  copy_slot(checkpoint_slot(seq), seq);
  checkpoint_pos_[size_t(seq)] = pos;
  return true;
}

std::string RecurrentState::positions(int32_t seq, int32_t length) const {
  std::string out = "0";
  for (const Snapshot& s : snapshots_[size_t(seq)])
    if (s.pos < length) out += ", " + std::to_string(s.pos);
  return out + ", " + std::to_string(length);
}

void RecurrentState::snapshot(int32_t seq, int32_t pos, bool pin) {
  if (opt_.snapshots_per_seq == 0 || pos <= 0) return;
  auto& list = snapshots_[size_t(seq)];
  if (pin)
    for (Snapshot& s : list) s.pinned = false;
  for (Snapshot& s : list)
    if (s.pos == pos) {
      s.pinned = s.pinned || pin;
      return copy_slot(s.slot, seq);
    }
  int32_t slot = -1;
  if (int32_t(list.size()) < opt_.snapshots_per_seq && !free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else if (!list.empty()) {
    // Evict the unpinned snapshot whose neighbours end up closest (the new one is the newest
    // neighbour; ties: the older one); the pinned one only when it is the only one.
    size_t victim = 0;
    int64_t best = INT64_MAX;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].pinned && list.size() > 1) continue;
      const int64_t prev = i == 0 ? 0 : list[i - 1].pos;
      const int64_t next = i + 1 < list.size() ? list[i + 1].pos : pos;
      if (next - prev < best) {
        best = next - prev;
        victim = i;
      }
    }
    slot = list[victim].slot;
    list.erase(list.begin() + long(victim));
  }
  if (slot < 0) return;
  copy_slot(slot, seq);
  list.push_back({.pos = pos, .slot = slot, .pinned = pin});
  std::sort(list.begin(), list.end(), [](const Snapshot& a, const Snapshot& b) { return a.pos < b.pos; });
}

int32_t RecurrentState::restorable(int32_t seq, int32_t n, int32_t length) const {
  n = std::min(n, length);
  if (n == length || n <= 0) return std::max(n, 0);
  int32_t best = 0;
  for (const Snapshot& s : snapshots_[size_t(seq)])
    if (s.pos <= n) best = std::max(best, s.pos);
  if (checkpoint_pos_[size_t(seq)] <= n) best = std::max(best, checkpoint_pos_[size_t(seq)]);
  return best;
}

void RecurrentState::truncate(int32_t seq, int32_t n, int32_t length) {
  n = std::min(n, length);
  int32_t& cp = checkpoint_pos_[size_t(seq)];
  if (n < length && n > 0) {
    const Snapshot* s = find(seq, n);
    BRISK_CHECK(s != nullptr || cp == n, "sequence ", seq, ": its recurrent state cannot be cut back to ", n,
                " positions; it is known after ", positions(seq, length), " (Context::seq_restorable)");
    copy_slot(seq, s ? s->slot : checkpoint_slot(seq));
  }
  if (cp > n) cp = -1;
  auto& list = snapshots_[size_t(seq)];
  for (auto it = list.begin(); it != list.end();) {
    if (it->pos > n) {
      free_slots_.push_back(it->slot);
      it = list.erase(it);
    } else {
      ++it;
    }
  }
}

void RecurrentState::copy(int32_t src, int32_t dst, int32_t n, int32_t src_length) {
  n = std::min(n, src_length);
  const Snapshot* from = nullptr;
  const bool at_checkpoint = n > 0 && checkpoint_pos_[size_t(src)] == n;
  if (n < src_length && n > 0 && !at_checkpoint) {
    from = find(src, n);
    BRISK_CHECK(from != nullptr, "seq_copy: the recurrent state of sequence ", src, " is not known after ", n,
                " positions; it is after ", positions(src, src_length), " (Context::seq_restorable)");
  }
  if (src != dst) {
    for (const Snapshot& s : snapshots_[size_t(dst)]) free_slots_.push_back(s.slot);
    snapshots_[size_t(dst)].clear();
    checkpoint_pos_[size_t(dst)] = -1;
  }
  if (n == 0) return;  // a sequence at position 0 starts from zeros (the ops reset it)
  const bool from_checkpoint = n < src_length && !from && at_checkpoint;
  copy_slot(dst, from ? from->slot : from_checkpoint ? checkpoint_slot(src) : src);
  if (src == dst) truncate(dst, n, n);
}

}  // namespace brisk
