// Attention and the KV store over paged caches (backend.h KvView): the same sequences stored
// through a scrambled block table (each sequence's blocks out of order and apart) or a shared
// one (sequence 1's first block is sequence 0's) give bit-identical outputs to contiguous
// storage, for the scalar reference and the CPU backend's fast kernels (AVX-512 / AVX2, the
// split decode over long contexts), decode and prefill shapes, several block sizes, F16 K
// caches in rows and tiled (KvView::tiled).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mat_view.h"
#include "backend/backend.h"
#include "core/error.h"
#include "kernels/cpu/ref.h"
#include "paged_kv.h"
#include "random_values.h"
#include "scoped_env.h"

namespace brisk {
namespace {

using testing::HostKv;
using testing::KvLayout;

struct PagedShape {
  QuantType kv;
  int32_t n_head, n_head_kv, head_dim, window;
  float softcap;
};

// Sequence 0 holds len0 positions, sequence 1 len1, whose first block_size positions equal
// sequence 0's (the part a shared table maps to sequence 0's block). Stored through `be`.
struct Filled {
  HostKv kv;
  int32_t len0, len1;
};
// tiled: the K view tiled (KvView::tiled) where the cache is F16.
Filled fill(Backend& be, const PagedShape& sh, int32_t bs, KvLayout layout, int32_t len0, int32_t len1,
            bool tiled = false) {
  const int64_t width = int64_t(sh.n_head_kv) * sh.head_dim;
  Filled f{testing::make_host_kv(sh.kv, width, std::max(len0, len1), 2, bs, layout, 1, tiled), len0, len1};
  const std::vector<float> k0 = test::gaussian(size_t(len0 * width), 1), v0 = test::gaussian(size_t(len0 * width), 2);
  const std::vector<float> k1 = test::gaussian(size_t(len1 * width), 3), v1 = test::gaussian(size_t(len1 * width), 4);
  std::vector<float> k, v;
  std::vector<int32_t> seq, pos;
  for (int32_t p = 0; p < len0; ++p) {
    seq.push_back(0);
    pos.push_back(p);
    k.insert(k.end(), k0.begin() + p * width, k0.begin() + (p + 1) * width);
    v.insert(v.end(), v0.begin() + p * width, v0.begin() + (p + 1) * width);
  }
  for (int32_t p = 0; p < len1; ++p) {
    const bool prefix = p < bs;
    if (prefix && layout == KvLayout::shared) continue;  // already there: sequence 0's block
    const auto& ks = prefix ? k0 : k1;
    const auto& vs = prefix ? v0 : v1;
    seq.push_back(1);
    pos.push_back(p);
    k.insert(k.end(), ks.begin() + p * width, ks.begin() + (p + 1) * width);
    v.insert(v.end(), vs.begin() + p * width, vs.begin() + (p + 1) * width);
  }
  const int64_t n = int64_t(seq.size());
  be.kv_store({.k = mat(k, n, width), .v = mat(v, n, width), .k_cache = f.kv.kc, .v_cache = f.kv.vc, .seq = seq.data(),
               .pos = pos.data()});
  return f;
}

// Attention of tokens (seq, pos) with queries q through `be` (nullptr: ref::attention).
std::vector<float> attend(Backend* be, const PagedShape& sh, const HostKv& kv, const std::vector<int32_t>& seq,
                          const std::vector<int32_t>& pos) {
  const int64_t n = int64_t(seq.size()), qw = int64_t(sh.n_head) * sh.head_dim;
  std::vector<float> q = test::gaussian(size_t(n * qw), 9, 2.0f), out(size_t(n * qw));
  const AttentionArgs a{.out = mat(out, n, qw), .q = mat(q, n, qw), .k_cache = kv.kc, .v_cache = kv.vc,
                        .seq = seq.data(), .pos = pos.data(), .n_head = sh.n_head, .n_head_kv = sh.n_head_kv,
                        .head_dim = sh.head_dim, .scale = 1.0f / std::sqrt(float(sh.head_dim)), .window = sh.window,
                        .softcap = sh.softcap};
  if (be) be->attention(a);
  else ref::attention(a);
  return out;
}

bool same(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(AttentionPaged, ScrambledAndSharedTablesMatchContiguous) {
  const std::vector<PagedShape> shapes = {
      {QuantType::F16, 8, 2, 64, 0, 0.0f},   {QuantType::F16, 32, 8, 128, 0, 0.0f},
      {QuantType::F32, 4, 2, 64, 20, 0.0f},  {QuantType::Q8_0, 6, 3, 128, 0, 0.0f},
      {QuantType::F16, 4, 4, 32, 0, 30.0f},  {QuantType::F16, 4, 1, 256, 0, 0.0f},
  };
  for (const char* env : {"", "BRISK_NO_AVX512"}) {
    std::unique_ptr<ScopedEnv> off;
    if (*env) off = std::make_unique<ScopedEnv>(env, "1");
    for (int threads : {1, 3}) {
      auto be = make_cpu_backend(threads);
      for (const PagedShape& sh : shapes) {
       for (const bool tiled : {false, true}) {
        if (tiled && sh.kv != QuantType::F16) continue;
        for (const int32_t bs : {16, 64}) {
          const int32_t len0 = 3 * bs + 5, len1 = 2 * bs + 7;
          const Filled flat = fill(*be, sh, bs, KvLayout::contiguous, len0, len1, tiled);
          for (const KvLayout layout : {KvLayout::scrambled, KvLayout::shared}) {
            const Filled paged = fill(*be, sh, bs, layout, len0, len1, tiled);
            std::vector<int32_t> dseq = {0, 1}, dpos = {len0 - 1, len1 - 1}, pseq, ppos;
            for (int32_t p = 0; p < len0; ++p) { pseq.push_back(0); ppos.push_back(p); }
            for (int32_t p = 0; p < len1; ++p) { pseq.push_back(1); ppos.push_back(p); }
            const std::string what = str_cat(*env ? env : "best", " threads ", threads, " ",
                                             quant_type_info(sh.kv).name, " heads ", sh.n_head, "/", sh.n_head_kv,
                                             " hd ", sh.head_dim, " block ", bs, tiled ? " tiled" : "",
                                             layout == KvLayout::shared ? " shared" : " scrambled");
            // The reference runs the same everywhere: once, on the shapes of up to 8 heads (its
            // scalar prefill over the 32-head shape took most of this test's time, 105 s under
            // the sanitizers).
            const bool with_ref = !*env && threads == 1 && sh.n_head <= 8;
            for (Backend* b : {be.get(), static_cast<Backend*>(nullptr)}) {
              if (!b && !with_ref) continue;
              EXPECT_TRUE(same(attend(b, sh, paged.kv, dseq, dpos), attend(b, sh, flat.kv, dseq, dpos)))
                  << what << (b ? " kernel" : " reference") << " decode";
              EXPECT_TRUE(same(attend(b, sh, paged.kv, pseq, ppos), attend(b, sh, flat.kv, pseq, ppos)))
                  << what << (b ? " kernel" : " reference") << " prefill";
            }
          }
        }
       }
      }
    }
  }
}

// One decode token over a long context: the AVX-512 kernel splits the positions over the
// threads, each streaming its rows block by block. Bit-equal to contiguous storage.
TEST(AttentionPaged, SplitDecodeOverScrambledBlocks) {
  auto be = make_cpu_backend(3);
  for (const PagedShape& sh :
       {PagedShape{QuantType::F16, 8, 1, 128, 0, 0.0f}, PagedShape{QuantType::F32, 4, 2, 64, 900, 0.0f},
        PagedShape{QuantType::Q8_0, 6, 3, 128, 0, 0.0f}, PagedShape{QuantType::F16, 14, 2, 64, 900, 0.0f}}) {
    for (const bool tiled : {false, true}) {
      if (tiled && sh.kv != QuantType::F16) continue;
      for (const int32_t bs : {16, 256}) {
        const int32_t len = 2049;
        const Filled flat = fill(*be, sh, bs, KvLayout::contiguous, len, 1, tiled);
        const Filled paged = fill(*be, sh, bs, KvLayout::scrambled, len, 1, tiled);
        const std::vector<int32_t> seq = {0}, pos = {len - 1};
        EXPECT_TRUE(same(attend(be.get(), sh, paged.kv, seq, pos), attend(be.get(), sh, flat.kv, seq, pos)))
            << quant_type_info(sh.kv).name << " hd " << sh.head_dim << " block " << bs << " tiled " << tiled;
      }
    }
  }
}

// The store writes each row where the table says: reading back through the table gives the rows.
TEST(AttentionPaged, KvStoreWritesThroughTheTable) {
  auto be = make_cpu_backend(2);
  const PagedShape sh{QuantType::F32, 4, 2, 32, 0, 0.0f};
  const Filled a = fill(*be, sh, 16, KvLayout::contiguous, 50, 40);
  const Filled b = fill(*be, sh, 16, KvLayout::shared, 50, 40);
  for (int32_t s = 0; s < 2; ++s)
    for (int32_t p = 0; p < (s == 0 ? 50 : 40); ++p)
      ASSERT_EQ(std::memcmp(a.kv.kc.row(s, p), b.kv.kc.row(s, p), a.kv.kc.row_bytes), 0) << s << " " << p;
  EXPECT_EQ(b.kv.kc.row(1, 3), b.kv.kc.row(0, 3));  // the shared block
}

}  // namespace
}  // namespace brisk
