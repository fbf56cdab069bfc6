// The paged KV cache: the block allocator's reference counts, prefix sharing (seq_copy shares
// whole blocks, copies a partial last one), copy-on-write before a forward writes into a shared
// block, truncation releasing blocks, and pool growth keeping the contents.
#include <gtest/gtest.h>

#include <algorithm>
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

// Layers with a window keep only the blocks their attention can still read: layer 0 (window
// 20), layer 1 (whole context), layer 2 reading layer 0's cache. Written 8 positions per forward
// as a context does, a sequence holds at most (20 + 8 - 2) / 16 + 2 = 3 windowed blocks, every
// live position keeps its value, and released blocks are reused. A truncation or copy whose
// window reaches released blocks keeps nothing; one within the held window keeps its length.
TEST(KvCache, WindowedLayersKeepOnlyTheirWindow) {
  auto be = make_cpu_backend(1);
  const KvCacheOptions opt{.n_seq = 2, .n_ctx = 200, .type = QuantType::F32, .initial_capacity = 16, .block_size = 16,
                           .layers = {{.width = 8, .window = 20}, {.width = 16}, {.window = 20, .source = 0}},
                           .max_step = 8};
  KvCache kv(*be, opt);
  EXPECT_TRUE(kv.shares(2));
  EXPECT_EQ(kv.k()[2].data, kv.k()[0].data);
  EXPECT_EQ(kv.v()[2].table, kv.v()[0].table);
  EXPECT_NE(kv.k()[1].table, kv.k()[0].table);
  // Stores positions [from, to) of seq with base + pos in layers 0 and 1 (layer 2 has no cache).
  auto fill = [&](int32_t seq, int32_t from, int32_t to, float base) {
    for (int32_t p0 = from; p0 < to; p0 += 8) {
      const int32_t p1 = std::min(to, p0 + 8);
      std::vector<int32_t> len = {kv.length(0), kv.length(1)};
      len[size_t(seq)] = p1;
      kv.prepare(len);
      for (int32_t p = p0; p < p1; ++p)
        for (int il = 0; il < 2; ++il) {
          auto* k = reinterpret_cast<float*>(kv.k()[size_t(il)].row(seq, p));
          for (int64_t i = 0; i < kv.k()[size_t(il)].width; ++i) k[i] = base + float(p);
        }
      kv.set_length(seq, p1);
      EXPECT_LE(kv.blocks(0).n_used(), 3 * (seq + 1));
    }
  };
  auto value = [&](int il, int32_t seq, int32_t pos) { return reinterpret_cast<const float*>(kv.k()[size_t(il)].row(seq, pos))[0]; };
  fill(0, 0, 104, 1000.0f);
  EXPECT_EQ(kv.blocks(0).n_used(), 3);                 // blocks 4, 5, 6: positions 64..111
  EXPECT_EQ(kv.blocks(1).n_used(), 7);                 // the full layer keeps all
  EXPECT_EQ(kv.block(0, 3, 0), -1);
  EXPECT_GE(kv.block(0, 4, 0), 0);
  EXPECT_LE(kv.blocks(0).n_blocks(), 6);               // released blocks were reused
  for (int32_t p = 64; p < 104; ++p) ASSERT_EQ(value(0, 0, p), 1000.0f + float(p)) << p;
  for (int32_t p = 0; p < 104; ++p) ASSERT_EQ(value(1, 0, p), 1000.0f + float(p)) << p;

  // A copy whose window (positions 81..99 for length 100) is held shares those blocks only.
  EXPECT_EQ(kv.copy(0, 1, 100), 100);
  EXPECT_EQ(kv.length(1), 100);
  EXPECT_EQ(kv.block(1, 4, 0), -1);
  EXPECT_EQ(kv.block(1, 5, 0), kv.block(0, 5, 0));
  EXPECT_NE(kv.block(1, 6, 0), kv.block(0, 6, 0));     // the partial last block is copied
  EXPECT_EQ(kv.block(1, 0, 1), kv.block(0, 0, 1));     // the full layer shares from the start
  for (int32_t p = 81; p < 100; ++p) ASSERT_EQ(value(0, 1, p), 1000.0f + float(p)) << p;
  fill(1, 100, 110, 3000.0f);
  for (int32_t p = 64; p < 104; ++p) ASSERT_EQ(value(0, 0, p), 1000.0f + float(p)) << p;
  // Back to 50: its window (31..49) was released, so nothing is kept (nor shared).
  EXPECT_EQ(kv.copy(0, 1, 50), 0);
  EXPECT_EQ(kv.length(1), 0);
  EXPECT_EQ(kv.block(1, 0, 1), -1);
  EXPECT_EQ(kv.truncate(0, 90), 90);                   // window 71..89: held
  EXPECT_EQ(kv.block(0, 6, 0), -1);
  EXPECT_EQ(kv.truncate(0, 40), 0);                    // window 21..39: released
  EXPECT_EQ(kv.blocks(0).n_used(), 0);
  EXPECT_EQ(kv.blocks(1).n_used(), 0);
  fill(0, 0, 30, 5000.0f);                             // a fresh start uses the pool again
  for (int32_t p = 11; p < 30; ++p) ASSERT_EQ(value(0, 0, p), 5000.0f + float(p)) << p;
  EXPECT_EQ(kv.truncate(0, 12), 12);                   // window 0..11: nothing was released
}

// The device plan: the full group at n_ctx, the windowed group at its per-sequence bound, and
// the block tables of both.
TEST(KvCache, PlanBytesCountsEachGroup) {
  const KvCacheOptions opt{.n_seq = 2, .n_ctx = 200, .type = QuantType::F16, .block_size = 16,
                           .layers = {{.width = 8, .window = 20}, {.width = 16}, {.window = 20, .source = 0}},
                           .max_step = 8};
  const uint64_t windowed = 2 * 3 * 16 * 8 * 2 * 2, full = 2 * 13 * 16 * 16 * 2 * 2, tables = 2 * 2 * 13 * 4;
  EXPECT_EQ(KvCache::plan_bytes(opt), windowed + full + tables);
  KvCacheOptions bad = opt;
  bad.layers[2].source = 2;
  EXPECT_THROW(KvCache::plan_bytes(bad), Error);
  bad.layers[2].source = 0;
  bad.layers[2].width = 16;
  EXPECT_THROW(KvCache::plan_bytes(bad), Error);
}

}  // namespace
}  // namespace brisk
