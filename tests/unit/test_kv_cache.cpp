// The paged KV cache: the block allocator's reference counts, prefix sharing (seq_copy shares
// whole blocks, copies a partial last one), copy-on-write before a forward writes into a shared
// block, truncation releasing blocks, and pool growth keeping the contents.
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "core/fp16.h"
#include "kernels/cpu/ops.h"
#include "runtime/kv_blocks.h"
#include "runtime/kv_cache.h"

namespace brisk {
namespace {

TEST(KvBlocks, AllocRetainReleaseGrow) {
  KvBlockAllocator a(3);
  EXPECT_EQ(a.alloc(), 0);
  EXPECT_EQ(a.alloc(), 1);
  EXPECT_EQ(a.alloc(), 2);
  EXPECT_EQ(a.alloc(), -1);
  a.retain(1);
  EXPECT_EQ(a.refs(1), 2);
  EXPECT_FALSE(a.release(1));
  EXPECT_TRUE(a.release(1));
  EXPECT_EQ(a.n_free(), 1);
  EXPECT_THROW(a.release(1), Error);  // not in use
  EXPECT_THROW(a.retain(7), Error);
  a.grow(5);
  EXPECT_EQ(a.n_blocks(), 5);
  EXPECT_EQ(a.alloc(), 1);  // the lowest free id first
  EXPECT_EQ(a.alloc(), 3);
  EXPECT_EQ(a.alloc(), 4);
  EXPECT_EQ(a.n_used(), 5);
  EXPECT_THROW(a.grow(2), Error);
}

// Row (layer, seq, pos) of K holds value v in every element; V holds -v.
void put(KvCache& kv, int32_t seq, int32_t pos, float v) {
  for (size_t il = 0; il < kv.k().size(); ++il) {
    auto* k = reinterpret_cast<float*>(kv.k()[il].row(seq, pos));
    auto* w = reinterpret_cast<float*>(kv.v()[il].row(seq, pos));
    for (int64_t i = 0; i < kv.k()[il].width; ++i) {
      k[i] = v + float(il);
      w[i] = -v - float(il);
    }
  }
}
bool holds(const KvCache& kv, int32_t seq, int32_t pos, float v) {
  for (size_t il = 0; il < kv.k().size(); ++il) {
    const auto* k = reinterpret_cast<const float*>(kv.k()[il].row(seq, pos));
    const auto* w = reinterpret_cast<const float*>(kv.v()[il].row(seq, pos));
    for (int64_t i = 0; i < kv.k()[il].width; ++i)
      if (k[i] != v + float(il) || w[i] != -v - float(il)) return false;
  }
  return true;
}
// Stores positions [from, to) of seq with values base + pos, as a forward would.
void write(KvCache& kv, int32_t seq, int32_t from, int32_t to, float base) {
  std::vector<int32_t> len(size_t(kv.options().n_seq));
  for (size_t s = 0; s < len.size(); ++s) len[s] = kv.length(int32_t(s));
  len[size_t(seq)] = to;
  kv.reserve(to);
  kv.prepare(len);
  for (int32_t p = from; p < to; ++p) put(kv, seq, p, base + float(p));
  kv.set_length(seq, to);
}

TEST(KvCache, SharesPrefixBlocksAndCopiesOnWrite) {
  auto be = make_cpu_backend(1);
  KvCache kv(*be, {.n_layer = 2, .width = 8, .n_seq = 3, .n_ctx = 100, .type = QuantType::F32,
                   .initial_capacity = 16, .block_size = 16});
  EXPECT_EQ(kv.max_blocks(), 7);
  EXPECT_EQ(kv.blocks().n_blocks(), 3);  // one block of the initial capacity per sequence
  write(kv, 0, 0, 40, 1000.0f);           // three blocks: the pool grows
  EXPECT_GE(kv.blocks().n_blocks(), 3);
  EXPECT_EQ(kv.blocks().n_used(), 3);
  for (int32_t p = 0; p < 40; ++p) ASSERT_TRUE(holds(kv, 0, p, 1000.0f + float(p))) << p;

  // Whole blocks shared, the partial third one copied.
  kv.copy(0, 1, 40);
  EXPECT_EQ(kv.length(1), 40);
  EXPECT_EQ(kv.block(1, 0), kv.block(0, 0));
  EXPECT_EQ(kv.block(1, 1), kv.block(0, 1));
  EXPECT_NE(kv.block(1, 2), kv.block(0, 2));
  EXPECT_EQ(kv.blocks().refs(kv.block(0, 0)), 2);
  EXPECT_EQ(kv.blocks().n_used(), 4);
  for (int32_t p = 0; p < 40; ++p) ASSERT_TRUE(holds(kv, 1, p, 1000.0f + float(p))) << p;

  // Sequence 1 continues in its private block: nothing is copied, sequence 0 is unchanged.
  write(kv, 1, 40, 45, 2000.0f);
  EXPECT_EQ(kv.blocks().n_used(), 4);
  for (int32_t p = 0; p < 40; ++p) ASSERT_TRUE(holds(kv, 0, p, 1000.0f + float(p))) << p;

  // Truncated into the shared second block, then written: copy-on-write of that block.
  const int32_t shared1 = kv.block(0, 1);
  kv.truncate(1, 20);
  EXPECT_EQ(kv.block(1, 2), -1);
  EXPECT_EQ(kv.blocks().n_used(), 3);
  write(kv, 1, 20, 24, 3000.0f);
  EXPECT_NE(kv.block(1, 1), shared1);
  EXPECT_EQ(kv.block(1, 0), kv.block(0, 0));
  EXPECT_EQ(kv.blocks().refs(shared1), 1);
  for (int32_t p = 0; p < 20; ++p) ASSERT_TRUE(holds(kv, 1, p, 1000.0f + float(p))) << p;
  for (int32_t p = 20; p < 24; ++p) ASSERT_TRUE(holds(kv, 1, p, 3000.0f + float(p))) << p;
  for (int32_t p = 0; p < 40; ++p) ASSERT_TRUE(holds(kv, 0, p, 1000.0f + float(p))) << p;

  // A copy at a block boundary shares only whole blocks; a copy onto itself truncates.
  kv.copy(0, 2, 32);
  EXPECT_EQ(kv.block(2, 1), kv.block(0, 1));
  EXPECT_EQ(kv.block(2, 2), -1);
  EXPECT_EQ(kv.blocks().refs(kv.block(0, 0)), 3);
  kv.copy(2, 2, 10);
  EXPECT_EQ(kv.length(2), 10);
  EXPECT_EQ(kv.block(2, 1), -1);
  EXPECT_THROW(kv.copy(0, 2, 41), Error);

  // Filling sequence 2 to the context grows the pool; everything stays where it was.
  write(kv, 2, 10, 100, 5000.0f);
  for (int32_t p = 0; p < 40; ++p) ASSERT_TRUE(holds(kv, 0, p, 1000.0f + float(p))) << p;
  for (int32_t p = 0; p < 10; ++p) ASSERT_TRUE(holds(kv, 2, p, 1000.0f + float(p))) << p;
  for (int32_t p = 10; p < 100; ++p) ASSERT_TRUE(holds(kv, 2, p, 5000.0f + float(p))) << p;
  EXPECT_EQ(kv.capacity(), 100);

  // Releasing everything frees every block.
  for (int32_t s = 0; s < 3; ++s) kv.truncate(s, 0);
  EXPECT_EQ(kv.blocks().n_used(), 0);
}

// A tiled K cache (F16, 16 positions of a block column-major): rows written and read back
// through kv_write_f32 / kv_read_f32 land where the layout says, and a copy of a partial block
// (seq_copy) carries the positions of a partial tile.
TEST(KvCache, TiledKeysRoundTripAndCopyPartialTiles) {
  auto be = make_cpu_backend(1);
  KvCache kv(*be, {.n_layer = 1, .width = 6, .n_seq = 2, .n_ctx = 64, .type = QuantType::F16,
                   .initial_capacity = 64, .block_size = 32, .tiled_k = true});
  const KvView& k = kv.k()[0];
  ASSERT_TRUE(k.tiled);
  ASSERT_FALSE(kv.v()[0].tiled);
  auto value = [](int32_t seq, int32_t pos, int64_t c) { return float(seq * 512 + pos * 8 + c); };  // exact in f16
  std::vector<int32_t> len = {40, 0};
  kv.prepare(len);
  std::vector<float> row(6), got(6);
  for (int32_t p = 0; p < 40; ++p) {
    for (int64_t c = 0; c < 6; ++c) row[size_t(c)] = value(0, p, c);
    cpu::kv_write_f32(k, 0, p, row.data());
  }
  kv.set_length(0, 40);
  // Position 21, column 4: tile 1 of block 0, half 4 * 16 + 5 of the tile.
  const auto* tile = reinterpret_cast<const uint16_t*>(k.tile_start(0, 21));
  EXPECT_EQ(tile, reinterpret_cast<const uint16_t*>(k.row(0, 16)));
  EXPECT_EQ(fp16_to_f32(tile[4 * 16 + 5]), value(0, 21, 4));
  kv.copy(0, 1, 37);  // block 0 shared, block 1 (positions 32..36, a partial tile) copied
  EXPECT_EQ(kv.block(1, 0), kv.block(0, 0));
  EXPECT_NE(kv.block(1, 1), kv.block(0, 1));
  for (int32_t p = 0; p < 37; ++p) {
    cpu::kv_read_f32(k, 1, p, 0, 6, got.data());
    for (int64_t c = 0; c < 6; ++c) ASSERT_EQ(got[size_t(c)], value(0, p, c)) << p << " " << c;
    cpu::kv_read_f32(k, 1, p, 2, 3, got.data());  // a column range
    for (int64_t c = 0; c < 3; ++c) ASSERT_EQ(got[size_t(c)], value(0, p, 2 + c)) << p << " " << c;
  }
  EXPECT_THROW(KvCache(*be, {.n_layer = 1, .width = 8, .n_seq = 1, .n_ctx = 64, .type = QuantType::F32,
                             .tiled_k = true}),
               Error);
}

TEST(KvCache, RejectsBadBlockSizes) {
  auto be = make_cpu_backend(1);
  const auto make = [&](int32_t bs) {
    KvCache kv(*be, KvCacheOptions{.n_layer = 1, .width = 8, .n_seq = 1, .n_ctx = 64, .type = QuantType::F32,
                                   .block_size = bs});
  };
  for (int32_t bs : {0, 8, 24, 100}) EXPECT_THROW(make(bs), Error) << bs;
  make(16);
}

}  // namespace
}  // namespace brisk
