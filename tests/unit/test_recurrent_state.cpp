// The recurrent-state cache of runtime/recurrent_state.h on its own: slots per sequence, snapshots
// restored by seq truncation and copy, the retention rule (the newest kept, older ones thinned so
// they stay spread out), and the errors for positions no snapshot holds.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "core/error.h"
#include "runtime/recurrent_state.h"

namespace brisk {
namespace {

// Two layers, one with two state tensors, one without state; 2 sequences, 3 snapshots each.
struct Fixture {
  std::unique_ptr<Backend> be = make_cpu_backend(1);
  RecurrentState st{*be, RecurrentStateOptions{.layers = {{5, 3}, {}}, .n_seq = 2, .snapshots_per_seq = 3}};
  // Marks sequence seq's live state with value v (every float of every tensor).
  void set(int32_t seq, float v) {
    for (const auto& layer : st.views())
      for (const StateView& s : layer)
        for (int64_t i = 0; i < s.slot_floats; ++i) s.slot(seq)[i] = v;
  }
  float get(int32_t seq) const {
    const float v = st.views()[0][0].slot(seq)[0];
    for (const auto& layer : st.views())
      for (const StateView& s : layer)
        for (int64_t i = 0; i < s.slot_floats; ++i) EXPECT_EQ(s.slot(seq)[i], v);
    return v;
  }
};

TEST(RecurrentState, LayoutAndSizes) {
  Fixture f;
  ASSERT_EQ(f.st.views().size(), 2u);
  EXPECT_EQ(f.st.views()[0].size(), 2u);
  EXPECT_TRUE(f.st.views()[1].empty());
  EXPECT_EQ(f.st.views()[0][0].n_slots, 2 * (1 + 3));
  EXPECT_EQ(f.st.slot_bytes(), size_t(8 * sizeof(float)));
  EXPECT_EQ(f.st.total_bytes(), size_t(8 * 8 * sizeof(float)));
}

TEST(RecurrentState, SnapshotsRestoreAndCopy) {
  Fixture f;
  for (int32_t pos : {16, 32, 48}) {
    f.set(0, float(pos));
    f.st.snapshot(0, pos);
  }
  f.set(0, 50.0f);  // live state after 50 positions
  EXPECT_EQ(f.st.n_snapshots(), 3);
  EXPECT_EQ(f.st.restorable(0, 40, 50), 32);
  EXPECT_EQ(f.st.restorable(0, 50, 50), 50);
  EXPECT_EQ(f.st.restorable(0, 90, 50), 50);
  EXPECT_EQ(f.st.restorable(0, 15, 50), 0);
  EXPECT_EQ(f.st.restorable(1, 10, 20), 0);  // no snapshots there
  // Copy the state after 32 positions to sequence 1, then cut sequence 0 back to 16.
  f.st.copy(0, 1, 32, 50);
  EXPECT_EQ(f.get(1), 32.0f);
  EXPECT_EQ(f.get(0), 50.0f);
  EXPECT_THROW(f.st.copy(0, 1, 40, 50), Error);
  EXPECT_THROW(f.st.truncate(0, 40, 50), Error);
  EXPECT_EQ(f.get(0), 50.0f);  // unchanged by the refusals
  f.st.truncate(0, 16, 50);
  EXPECT_EQ(f.get(0), 16.0f);
  EXPECT_EQ(f.st.n_snapshots(), 1);  // 32 and 48 are past the new length
  EXPECT_EQ(f.st.restorable(0, 40, 16), 16);
  f.st.truncate(0, 0, 16);
  EXPECT_EQ(f.st.n_snapshots(), 0);
}

// A prompt of 1000 positions (its last boundary pinned), then an answer decoded with a snapshot
// every 16: the prompt's snapshot and the newest stay, the third is spread out behind the newest
// rather than the previous boundary; each restores its own state.
TEST(RecurrentState, RetentionKeepsNewestAndPinned) {
  Fixture f;
  f.set(0, 992.0f);
  f.st.snapshot(0, 992, true);
  for (int32_t pos = 1008; pos <= 1600; pos += 16) {
    f.set(0, float(pos));
    f.st.snapshot(0, pos);
  }
  EXPECT_EQ(f.st.n_snapshots(), 3);
  EXPECT_EQ(f.st.restorable(0, 1600, 1610), 1600);
  EXPECT_EQ(f.st.restorable(0, 1000, 1610), 992);
  const int32_t middle = f.st.restorable(0, 1599, 1610);
  EXPECT_GT(middle, 992);
  EXPECT_LT(middle, 1600 - 16) << "the third snapshot is spread out, not the previous boundary";
  f.st.truncate(0, middle, 1610);
  EXPECT_EQ(f.get(0), float(middle));
  f.st.truncate(0, 992, middle);
  EXPECT_EQ(f.get(0), 992.0f);
  // A newer pin replaces the older one: without a pin the old prompt's snapshot may go.
  Fixture g;
  for (int32_t pos = 16; pos <= 64; pos += 16) g.st.snapshot(0, pos, pos == 16 || pos == 48);
  EXPECT_EQ(g.st.restorable(0, 47, 100), 32);  // 16 unpinned, evicted (ties: the older)
  EXPECT_EQ(g.st.restorable(0, 48, 100), 48);
}

TEST(RecurrentState, NoSnapshotsConfigured) {
  auto be = make_cpu_backend(1);
  RecurrentState st(*be, {.layers = {{4}}, .n_seq = 1, .snapshots_per_seq = 0});
  st.snapshot(0, 16);
  EXPECT_EQ(st.n_snapshots(), 0);
  EXPECT_EQ(st.restorable(0, 10, 20), 0);
  EXPECT_THROW(st.truncate(0, 10, 20), Error);
  st.truncate(0, 20, 20);  // the current length is always fine
  EXPECT_THROW(RecurrentState(*be, {.layers = {{0}}, .n_seq = 1}), Error);
}

}  // namespace
}  // namespace brisk
