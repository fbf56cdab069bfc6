// Per-sequence recurrent state of a Context (linear-attention layers: a conv window and a
// delta-rule state per layer), the second kind of cache beside the paged KV cache. The model
// declares the tensors each layer needs (LayerState::recurrent, floats per sequence); nothing
// here knows what they mean.
//
// Layout: per (layer, tensor) one F32 buffer in backend memory [n_slots, floats], allocated once
// (fixed addresses: a captured graph stays valid). Slot s < n_seq is sequence s's live state;
// the other slots hold snapshots: copies of a sequence's state as it was after `pos` positions,
// at most snapshots_per_seq per sequence. A recurrent state cannot be cut back like KV rows, so
// snapshots are what makes seq_truncate / seq_copy to a shorter length possible: the state can
// be restored exactly at a snapshot's position (and at 0, and at the current length). With
// `checkpoints`, one more slot per sequence holds the state at a position that speculative
// decoding chose (before a verify forward), so that rejected tokens can be cut back.
//
// Retention: when a sequence's snapshots are full, the one whose removal leaves the smallest gap
// between its neighbours goes (ties: the older one); the newest and the pinned one stay. The
// runtime pins the snapshot ending a multi-token run (a prompt's last boundary): a conversation's
// next turn restarts either there (a template that rewrites the last answer, e.g. dropping its
// reasoning) or near the newest (a conversation continued as it was); the others thin out
// geometrically behind the newest.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "models/forward.h"

namespace brisk {

struct RecurrentStateOptions {
  std::vector<std::vector<int64_t>> layers = {};  // [n_layer] floats per sequence of each tensor
  int32_t n_seq = 1;
  int32_t snapshots_per_seq = 0;
  bool checkpoints = false;  // one more slot per sequence for checkpoint() (speculative decoding)
};

class RecurrentState {
 public:
  RecurrentState(Backend& backend, const RecurrentStateOptions& opt);
  ~RecurrentState();
  RecurrentState(const RecurrentState&) = delete;
  RecurrentState& operator=(const RecurrentState&) = delete;

  const RecurrentViews& views() const { return views_; }
  size_t slot_bytes() const { return slot_bytes_; }          // one sequence's state, all layers
  size_t total_bytes() const { return slot_bytes_ * size_t(n_slots_); }
  int32_t n_snapshots() const;                                // held now, all sequences

  // Records seq's live state as its state after pos positions (replacing one at pos, or one
  // chosen by the retention rule when seq's snapshots are full). pin: keep this one (and no
  // earlier pinned one) out of the retention rule.
  void snapshot(int32_t seq, int32_t pos, bool pin = false);
  // Records seq's live state as its state after pos positions in the sequence's checkpoint slot
  // (outside the snapshots and their retention; the next checkpoint replaces it), so that a
  // speculative verify can be cut back to pos. Returns false when the state has no such slot.
  bool checkpoint(int32_t seq, int32_t pos);
  // The largest m <= n at which seq's state is known: its current length `length`, a snapshot, or 0.
  int32_t restorable(int32_t seq, int32_t n, int32_t length) const;
  // Makes seq's live state its state after n positions and forgets snapshots past n. n must be
  // restorable (throws otherwise, naming the positions that are).
  void truncate(int32_t seq, int32_t n, int32_t length);
  // dst's live state := src's state after n positions (src's length `src_length`); dst's
  // snapshots are forgotten. n must be restorable for src.
  void copy(int32_t src, int32_t dst, int32_t n, int32_t src_length);

 private:
  struct Snapshot {
    int32_t pos = 0;
    int32_t slot = 0;
    bool pinned = false;
  };
  void copy_slot(int32_t dst, int32_t src);
  const Snapshot* find(int32_t seq, int32_t pos) const;
  std::string positions(int32_t seq, int32_t length) const;
  Backend& backend_;
  RecurrentStateOptions opt_;
  int32_t n_slots_ = 0;
  size_t slot_bytes_ = 0;
  std::vector<std::vector<void*>> buffers_;          // [n_layer][tensor]
  RecurrentViews views_;
  std::vector<std::vector<Snapshot>> snapshots_;     // [n_seq], by position
  std::vector<int32_t> free_slots_;
  std::vector<int32_t> checkpoint_pos_;              // [n_seq] position of the checkpoint, -1: none
  int32_t checkpoint_slot(int32_t seq) const { return opt_.n_seq * (1 + opt_.snapshots_per_seq) + seq; }
};

}  // namespace brisk
