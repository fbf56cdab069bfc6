// Every CPU backend op against its scalar reference (kernels/cpu/ref.h) over shapes, weight
// formats, KV cache types and thread counts, plus the thread pool.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>
#include <chrono>

#include "mat_view.h"
#include "backend/backend.h"
#include "core/error.h"
#include "core/flags.h"
#include "core/thread_pool.h"
#include "kernels/cpu/dot.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ref.h"
#include "models/rope_scaling.h"
#include "quant/format.h"
#include "paged_kv.h"
#include "scoped_env.h"

namespace brisk {
namespace {

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 5, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      for (int rep = 0; rep < 20; ++rep)
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
        });
      for (auto& h : hits) EXPECT_EQ(h.load(), 20);
    }
  }
}

TEST(ThreadPool, EveryPartRunsExactlyOnceOverManyRuns) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(3);
  for (int rep = 0; rep < 20000; ++rep) {
    pool.run([&](int ith, int nth) {
      ASSERT_EQ(nth, rep % 2 ? 2 : 3);
      hits[size_t(ith)]++;
    }, rep % 2 ? 2 : 3);
  }
  EXPECT_EQ(hits[0].load(), 20000);
  EXPECT_EQ(hits[1].load(), 20000);
  EXPECT_EQ(hits[2].load(), 10000);
}

TEST(ThreadPool, RethrowsWorkerException) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int ith, int) {
    if (ith == 1) throw std::runtime_error("boom");
  }),
               std::runtime_error);
  int calls = 0;
  pool.run([&](int ith, int) { if (ith == 0) ++calls; });
  EXPECT_EQ(calls, 1);
}

// Weight rows in `type`: quantized from random floats when the format has a reference
// quantizer, else taken from the shared GGUF reference blocks.
std::vector<uint8_t> make_weight(QuantType type, int64_t n_in, int64_t n_out, uint32_t seed, bool* ok) {
  const size_t rb = size_t(quant_row_bytes(type, uint64_t(n_in)).value());
  std::vector<uint8_t> out(rb * size_t(n_out));
  const FormatTraits& tr = format_traits(type);
  *ok = true;
  if (tr.quantize_row_ref || type == QuantType::F32 || type == QuantType::F16 || type == QuantType::BF16) {
    const std::vector<float> f = random_vec(size_t(n_in * n_out), seed, 0.5f);
    for (int64_t r = 0; r < n_out; ++r)
      cpu::row_from_f32(type, f.data() + r * n_in, out.data() + size_t(r) * rb, n_in);
    return out;
  }
  const std::string path = std::string(BRISK_SHARED_DATA) + "/quant/" +
                           std::string(quant_type_info(type).name) + ".dequant.blocks";
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> blocks((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (blocks.empty()) {
    *ok = false;
    return out;
  }
  for (size_t i = 0; i < out.size(); ++i) out[i] = blocks[(i + seed) % blocks.size() / quant_type_info(type).type_size * quant_type_info(type).type_size + (i % quant_type_info(type).type_size)];
  return out;
}

class MatmulFormats : public ::testing::TestWithParam<QuantType> {};

TEST_P(MatmulFormats, MatchesReferenceOverShapes) {
  const QuantType type = GetParam();
  const int64_t block = quant_type_info(type).block_size;
  for (int threads : {1, 2, 3}) {
    auto be = make_cpu_backend(threads);
    for (int64_t n_in : {block, block * 3, block * 5, block * 2 >= 256 ? block * 2 : 256, block * 4 >= 512 ? block * 4 : 512}) {
      for (int64_t n_out : {1, 7, 40}) {
        for (int64_t n_tok : {1, 3, 9}) {
          bool ok = true;
          std::vector<uint8_t> w = make_weight(type, n_in, n_out, uint32_t(n_in + n_out), &ok);
          if (!ok) BRISK_SKIP_MISSING_ASSET() << "no reference blocks for " << quant_type_info(type).name << " under " << BRISK_SHARED_DATA;
          const Weight wt{.type = type, .n_in = n_in, .n_out = n_out,
                          .row_bytes = size_t(quant_row_bytes(type, uint64_t(n_in)).value()), .data = w.data()};
          std::vector<float> x = random_vec(size_t(n_tok * n_in), uint32_t(n_tok * 7));
          std::vector<float> bias = random_vec(size_t(n_out), 5);
          std::vector<float> got(size_t(n_tok * n_out)), want(size_t(n_tok * n_out));
          const MatmulArgs a{.out = mat(got, n_tok, n_out), .x = mat(x, n_tok, n_in), .w = wt, .bias = bias.data()};
          be->matmul(a);
          MatmulArgs r = a;
          r.out = mat(want, n_tok, n_out);
          ref::matmul(r);
          // Tolerance scales with sum |w_i x_i| of the row (float accumulation in vec_dot). Q8_1
          // activations carry their block sums in fp16 (used with the Q4_1/Q5_1 offsets), which
          // the dequantized reference does not see: a relative 2^-11 per block.
          const double rel = format_traits(type).vec_dot_type == QuantType::Q8_1 ? 2e-3 : 2e-5;
          std::vector<float> wrow(static_cast<size_t>(n_in));
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t o = 0; o < n_out; ++o) {
              cpu::row_to_f32(type, wt.row(o), wrow.data(), n_in);
              double mag = 0.0;
              for (int64_t i = 0; i < n_in; ++i) mag += std::fabs(double(wrow[size_t(i)]) * x[size_t(t * n_in + i)]);
              ASSERT_NEAR(got[size_t(t * n_out + o)], want[size_t(t * n_out + o)], rel * mag + 1e-5)
                  << quant_type_info(type).name << " n_in=" << n_in << " n_out=" << n_out << " tok=" << t << " row=" << o;
            }
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, MatmulFormats,
                         ::testing::Values(QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q4_0,
                                           QuantType::Q4_1, QuantType::Q5_0, QuantType::Q5_1, QuantType::Q8_0,
                                           QuantType::Q2_K, QuantType::Q3_K, QuantType::Q4_K, QuantType::Q5_K,
                                           QuantType::Q6_K, QuantType::IQ4_NL, QuantType::IQ4_XS,
                                           QuantType::IQ2_XXS, QuantType::IQ3_S, QuantType::TQ2_0,
                                           QuantType::MXFP4, QuantType::Q4_0_R16, QuantType::Q5_0_R16,
                                           QuantType::Q8_0_R16),
                         [](const auto& info) { return std::string(quant_type_info(info.param).name); });

// Matmuls of one input (q/k/v, gate/up) through matmuls(): the input is quantized (and, in
// prefill, packed for the GEMM) once for every matmul that can share it. Every output must be
// bit-equal to the matmul run on its own, for lists that share the packing (Q4_K with Q4_K),
// lists that cannot (Q4_K with Q6_K, Q4_0 with Q8_0: other block or offset) and decode sizes
// (5 tokens: the list's row tiles split over 2-3 threads as one sequence, parts crossing matmuls).
TEST(Ops, MatmulsOfOneInputEqualOneByOne) {
  const std::vector<std::vector<QuantType>> lists = {{QuantType::Q4_K, QuantType::Q4_K, QuantType::Q4_K},
                                                     {QuantType::Q4_K, QuantType::Q4_K, QuantType::Q6_K},
                                                     {QuantType::Q8_0, QuantType::Q8_0, QuantType::Q8_0_R16},
                                                     {QuantType::Q4_0, QuantType::Q8_0, QuantType::Q4_0_R16},
                                                     {QuantType::F16, QuantType::F16}};
  for (int threads : {1, 2, 3}) {
    auto be = make_cpu_backend(threads);
    for (const auto& types : lists) {
      for (int64_t n_tok : {1, 5, 9, 40}) {
        const int64_t n_in = 512;
        std::vector<std::vector<uint8_t>> w(types.size());
        std::vector<MatmulArgs> args(types.size());
        std::vector<std::vector<float>> fused(types.size()), alone(types.size());
        std::vector<float> x = random_vec(size_t(n_tok * n_in), uint32_t(n_tok));
        for (size_t i = 0; i < types.size(); ++i) {
          const int64_t n_out = 16 * int64_t(i + 1) + 8;
          bool ok = true;
          w[i] = make_weight(types[i], n_in, n_out, uint32_t(7 + i), &ok);
          ASSERT_TRUE(ok);
          fused[i].assign(size_t(n_tok * n_out), 0.0f);
          alone[i].assign(size_t(n_tok * n_out), 1.0f);
          args[i] = MatmulArgs{.out = mat(fused[i], n_tok, n_out), .x = mat(x, n_tok, n_in),
                               .w = Weight{.type = types[i], .n_in = n_in, .n_out = n_out,
                                           .row_bytes = size_t(quant_row_bytes(types[i], uint64_t(n_in)).value()),
                                           .data = w[i].data()}};
        }
        be->matmuls(args.data(), int(args.size()));
        for (size_t i = 0; i < types.size(); ++i) {
          MatmulArgs one = args[i];
          one.out = mat(alone[i], n_tok, one.w.n_out);
          be->matmul(one);
          ASSERT_EQ(0, std::memcmp(fused[i].data(), alone[i].data(), sizeof(float) * fused[i].size()))
              << quant_type_info(types[i]).name << " in a list of " << types.size() << ", " << n_tok
              << " tokens, " << threads << " threads";
        }
      }
    }
  }
}

// The balanced decode split (kernels/cpu/ops.h: pieces of each part's share, then pieces taken
// from the back of the others') against the fixed split: bit-equal outputs for lists of one
// input over 2-4 parts, 1 and 5 tokens, pieces of one tile, and with part 0 starting late so
// that the other parts take most of its share. Reusing a thread's prepared activations within
// an epoch gives the same bits, and a new epoch over the same buffer with other contents is
// prepared again.
TEST(Ops, BalancedDecodeSplitEqualsFixedSplit) {
  const std::vector<std::vector<QuantType>> lists = {{QuantType::Q8_0_R16},
                                                     {QuantType::Q4_0_R16, QuantType::Q4_0_R16, QuantType::Q8_0_R16},
                                                     {QuantType::Q5_0_R16, QuantType::Q5_0_R16},
                                                     {QuantType::Q4_K, QuantType::Q6_K},
                                                     {QuantType::F16}};
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    for (const auto& types : lists) {
      for (int64_t n_tok : {1, 5}) {
        const int64_t n_in = 512;
        std::vector<std::vector<uint8_t>> w(types.size());
        std::vector<MatmulArgs> args(types.size());
        std::vector<std::vector<float>> fixed(types.size()), balanced(types.size());
        std::vector<float> x = random_vec(size_t(n_tok * n_in), uint32_t(n_tok + 3));
        for (size_t i = 0; i < types.size(); ++i) {
          const int64_t n_out = 16 * 9 * int64_t(i + 1) + 8;  // a partial last tile
          bool ok = true;
          w[i] = make_weight(types[i], n_in, n_out, uint32_t(11 + i), &ok);
          ASSERT_TRUE(ok);
          fixed[i].assign(size_t(n_tok * n_out), 0.0f);
          balanced[i].assign(size_t(n_tok * n_out), std::nanf(""));
          args[i] = MatmulArgs{.out = mat(fixed[i], n_tok, n_out), .x = mat(x, n_tok, n_in),
                               .w = Weight{.type = types[i], .n_in = n_in, .n_out = n_out,
                                           .row_bytes = size_t(quant_row_bytes(types[i], uint64_t(n_in)).value()),
                                           .data = w[i].data()}};
        }
        std::vector<uint8_t> act(cpu::matmul_act_row_bytes(types[0], n_in) * size_t(n_tok));
        cpu::matmul_quantize_rows(args[0], act.data(), nullptr, 0, 1);
        const int n = int(args.size());
        pool.run([&](int ith, int nth) { cpu::matmul_list_rows(args.data(), n, act.data(), nullptr, ith, nth); }, threads);
        std::vector<MatmulArgs> bal = args;
        for (size_t i = 0; i < bal.size(); ++i) bal[i].out = mat(balanced[i], n_tok, bal[i].w.n_out);
        for (bool late_start : {false, true}) {
          for (int round = 0; round < 20; ++round) {
            cpu::TileClaims claims;
            ASSERT_TRUE(cpu::matmul_balanced_split(bal.data(), n, nullptr, threads, claims, 0, 1));
            const uint64_t epoch = round % 2 ? kernels::new_activation_epoch() : 0;
            pool.run([&](int ith, int nth) {
              if (late_start && ith == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
              cpu::matmul_list_rows_balanced(bal.data(), n, act.data(), nullptr, ith, nth, claims, epoch);
            }, threads);
            for (size_t i = 0; i < types.size(); ++i)
              ASSERT_EQ(0, std::memcmp(fixed[i].data(), balanced[i].data(), sizeof(float) * fixed[i].size()))
                  << quant_type_info(types[i]).name << " in a list of " << types.size() << ", " << n_tok << " tokens, "
                  << threads << " parts, round " << round << (late_start ? ", part 0 late" : "");
          }
        }
        // A new epoch over the same buffer with other contents: prepared again, not reused.
        std::vector<float> x2 = random_vec(size_t(n_tok * n_in), uint32_t(n_tok + 99));
        MatmulArgs q2 = args[0];
        q2.x = mat(x2, n_tok, n_in);
        cpu::matmul_quantize_rows(q2, act.data(), nullptr, 0, 1);
        std::vector<std::vector<float>> want2(types.size()), got2(types.size());
        std::vector<MatmulArgs> a_want = args, a_got = args;
        for (size_t i = 0; i < types.size(); ++i) {
          want2[i].assign(fixed[i].size(), 0.0f);
          got2[i].assign(fixed[i].size(), 1.0f);
          a_want[i].out = mat(want2[i], n_tok, args[i].w.n_out);
          a_got[i].out = mat(got2[i], n_tok, args[i].w.n_out);
        }
        pool.run([&](int ith, int nth) { cpu::matmul_list_rows(a_want.data(), n, act.data(), nullptr, ith, nth, 0); }, threads);
        const uint64_t epoch2 = kernels::new_activation_epoch();
        pool.run([&](int ith, int nth) { cpu::matmul_list_rows(a_got.data(), n, act.data(), nullptr, ith, nth, epoch2); }, threads);
        for (size_t i = 0; i < types.size(); ++i)
          ASSERT_EQ(0, std::memcmp(want2[i].data(), got2[i].data(), sizeof(float) * want2[i].size()))
              << quant_type_info(types[i]).name << ": stale prepared activations after a new epoch";
      }
    }
  }
}

// Shares under the size threshold, prefill and BRISK_NO_BALANCED_SPLIT keep the fixed split.
TEST(Ops, BalancedDecodeSplitOnlyForLargeDecodeMatmuls) {
  std::vector<uint8_t> w(size_t(quant_row_bytes(QuantType::Q8_0, 512).value()) * 64);
  std::vector<float> x(512 * 16), out(64 * 16);
  const Weight wt{.type = QuantType::Q8_0, .n_in = 512, .n_out = 64,
                  .row_bytes = size_t(quant_row_bytes(QuantType::Q8_0, 512).value()), .data = w.data()};
  MatmulArgs a{.out = mat(out, 1, 64), .x = mat(x, 1, 512), .w = wt};
  cpu::TileClaims claims;
  EXPECT_TRUE(cpu::matmul_balanced_split(&a, 1, nullptr, 2, claims, 0, 1));
  EXPECT_FALSE(cpu::matmul_balanced_split(&a, 1, nullptr, 1, claims, 0, 1));
  EXPECT_FALSE(cpu::matmul_balanced_split(&a, 1, nullptr, 2, claims, w.size(), 1));  // shares of half the bytes
  a.x = mat(x, 16, 512);
  a.out = mat(out, 16, 64);
  EXPECT_FALSE(cpu::matmul_balanced_split(&a, 1, nullptr, 2, claims, 0, 1));  // prefill
  a.x = mat(x, 1, 512);
  a.out = mat(out, 1, 64);
  {
    ScopedEnv off("BRISK_NO_BALANCED_SPLIT", "1");
    EXPECT_FALSE(cpu::matmul_balanced_split(&a, 1, nullptr, 2, claims, 0, 1));
  }
}

TEST(Ops, MatmulQuantizedActivationsStayCloseToFloat) {
  // Q8_0 weights x Q8_0 activations vs the exact float product of the dequantized weights.
  auto be = make_cpu_backend(2);
  const int64_t n_in = 256, n_out = 16, n_tok = 4;
  bool ok;
  std::vector<uint8_t> w = make_weight(QuantType::Q8_0, n_in, n_out, 3, &ok);
  const Weight wt{.type = QuantType::Q8_0, .n_in = n_in, .n_out = n_out, .row_bytes = 34 * 8, .data = w.data()};
  std::vector<float> x = random_vec(size_t(n_tok * n_in), 9), got(size_t(n_tok * n_out));
  be->matmul({.out = mat(got, n_tok, n_out), .x = mat(x, n_tok, n_in), .w = wt});
  std::vector<float> wrow(static_cast<size_t>(n_in));
  for (int64_t t = 0; t < n_tok; ++t)
    for (int64_t o = 0; o < n_out; ++o) {
      cpu::row_to_f32(QuantType::Q8_0, wt.row(o), wrow.data(), n_in);
      double exact = 0.0, mag = 0.0;
      for (int64_t i = 0; i < n_in; ++i) {
        exact += double(wrow[size_t(i)]) * x[size_t(t * n_in + i)];
        mag += std::fabs(double(wrow[size_t(i)]) * x[size_t(t * n_in + i)]);
      }
      EXPECT_NEAR(got[size_t(t * n_out + o)], exact, 0.02 * mag);
    }
}

TEST(Ops, RmsNormMatchesReference) {
  auto be = make_cpu_backend(2);
  for (int64_t rows : {1, 5}) {
    for (auto [cols, group] : std::vector<std::pair<int64_t, int64_t>>{{64, 0}, {96, 32}, {7, 0}, {128, 16}}) {
      std::vector<float> x = random_vec(size_t(rows * cols), 1, 3.0f);
      std::vector<float> w = random_vec(size_t(group ? group : cols), 2);
      std::vector<float> got(x.size()), want(x.size());
      RmsNormArgs a{.out = mat(got, rows, cols), .x = mat(x, rows, cols), .weight = w.data(), .group = group, .eps = 1e-5f};
      be->rms_norm(a);
      a.out = mat(want, rows, cols);
      ref::rms_norm(a);
      EXPECT_LT(max_abs_diff(got, want), 1e-5f) << rows << "x" << cols << " group " << group;
      // In place gives the same result.
      std::vector<float> inplace = x;
      be->rms_norm({.out = mat(inplace, rows, cols), .x = mat(inplace, rows, cols), .weight = w.data(), .group = group, .eps = 1e-5f});
      EXPECT_EQ(inplace, got);
    }
  }
}

RopeTable table_for(const char* type, int32_t n_rot, bool neox) {
  RopeScaling s;
  s.type = type;
  s.factor = 8.0f;
  s.original_ctx = 64;
  return rope_table_build({.n_rot = n_rot, .theta = 10000.0f, .n_ctx_train = 512, .scaling = s, .neox = neox});
}

TEST(Ops, RopeMatchesReferenceForPairingsScalingAndPartialRotary) {
  auto be = make_cpu_backend(2);
  for (const char* type : {"default", "linear", "llama3", "yarn"}) {
    for (bool neox : {false, true}) {
      for (auto [head_dim, n_rot] : std::vector<std::pair<int32_t, int32_t>>{{16, 16}, {64, 32}, {32, 8}}) {
        const RopeTable tab = table_for(type, n_rot, neox);
        const int32_t n_head = 3, n_tok = 5;
        std::vector<float> x = random_vec(size_t(n_tok * n_head * head_dim), 4);
        std::vector<int32_t> pos = {0, 1, 17, 300, 5000};
        std::vector<float> got = x, want = x;
        RopeArgs a{.x = mat(got, n_tok, n_head * head_dim), .pos = pos.data(), .n_head = n_head,
                   .head_dim = head_dim, .table = &tab};
        be->rope(a);
        a.x = mat(want, n_tok, n_head * head_dim);
        ref::rope(a);
        EXPECT_LT(max_abs_diff(got, want), 1e-4f) << type << " neox=" << neox << " hd=" << head_dim;
        // Position 0 is the identity up to attn_factor; dims past n_rot are untouched.
        for (int32_t i = 0; i < n_head * head_dim; ++i) {
          const int32_t d = i % head_dim;
          if (pos[0] != 0) continue;
          if (d >= n_rot) {
            EXPECT_EQ(got[size_t(i)], x[size_t(i)]);
          } else {
            EXPECT_NEAR(got[size_t(i)], x[size_t(i)] * tab.attn_factor, 1e-6f);
          }
        }
      }
    }
  }
}

TEST(Ops, RopeNormalPairingOnPermutedRowsEqualsNeox) {
  // llama.cpp's converter permutes q/k rows so that adjacent-pair rope on GGUF weights equals
  // half-split rope on the HF weights: element 2i <- i, 2i+1 <- i + n/2.
  auto be = make_cpu_backend(1);
  const int32_t hd = 16;
  std::vector<float> x = random_vec(hd, 8), perm(hd);
  for (int32_t i = 0; i < hd / 2; ++i) {
    perm[size_t(2 * i)] = x[size_t(i)];
    perm[size_t(2 * i + 1)] = x[size_t(i + hd / 2)];
  }
  const RopeTable neox = table_for("default", hd, true), normal = table_for("default", hd, false);
  int32_t pos = 11;
  be->rope({.x = mat(x, 1, hd), .pos = &pos, .n_head = 1, .head_dim = hd, .table = &neox});
  be->rope({.x = mat(perm, 1, hd), .pos = &pos, .n_head = 1, .head_dim = hd, .table = &normal});
  for (int32_t i = 0; i < hd / 2; ++i) {
    EXPECT_FLOAT_EQ(perm[size_t(2 * i)], x[size_t(i)]);
    EXPECT_FLOAT_EQ(perm[size_t(2 * i + 1)], x[size_t(i + hd / 2)]);
  }
}

TEST(Ops, RopeTableScalingVariants) {
  const RopeTable base = table_for("default", 16, true);
  EXPECT_FLOAT_EQ(base.inv_freq[0], 1.0f);
  EXPECT_NEAR(base.inv_freq[1], std::pow(10000.0, -2.0 / 16), 1e-7);
  const RopeTable lin = table_for("linear", 16, true);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(lin.inv_freq[i], base.inv_freq[i] / 8.0f, 1e-9);
  // llama3 (original context 64): wavelength < 16 kept, > 64 divided by the factor.
  const RopeTable l3 = table_for("llama3", 16, true);
  for (size_t i = 0; i < 8; ++i) {
    const double wl = 2 * M_PI / base.inv_freq[i];
    if (wl < 16) {
      EXPECT_FLOAT_EQ(l3.inv_freq[i], base.inv_freq[i]);
    }
    if (wl > 64) {
      EXPECT_NEAR(l3.inv_freq[i], base.inv_freq[i] / 8.0f, 1e-9);
    }
    EXPECT_LE(l3.inv_freq[i], base.inv_freq[i]);
  }
  const RopeTable yarn = table_for("yarn", 16, true);
  EXPECT_NEAR(yarn.attn_factor, 0.1 * std::log(8.0) + 1.0, 1e-6);
  EXPECT_FLOAT_EQ(yarn.inv_freq[0], base.inv_freq[0]);  // highest frequency extrapolated
  EXPECT_NEAR(yarn.inv_freq[7], base.inv_freq[7] / 8.0f, 1e-9);  // lowest interpolated
  EXPECT_THROW(table_for("dynamic-unknown", 16, true), Error);
  // Proportional (Gemma 4 full layers): the first quarter of the pairs rotate with theta^(-2i/n_rot)
  // of the whole head, divided by the factor; the rest have frequency 0.
  RopeScaling prop;
  prop.type = "proportional";
  prop.factor = 2.0f;
  const RopeTable pt = rope_table_build({.n_rot = 32, .theta = 10000.0f, .scaling = prop, .neox = true, .proportion = 0.25f});
  ASSERT_EQ(pt.inv_freq.size(), 16u);
  for (size_t i = 0; i < 16; ++i)
    EXPECT_NEAR(pt.inv_freq[i], i < 4 ? std::pow(10000.0, -2.0 * double(i) / 32.0) / 2.0 : 0.0, 1e-7) << i;
  EXPECT_THROW(rope_table_build({.n_rot = 32, .scaling = prop, .proportion = 0.0f}), Error);
}

// Frequencies of 0 leave their pairs unrotated: a proportional table rotates the first pairs
// of each half-split head only.
TEST(Ops, RopeWithZeroFrequenciesKeepsThosePairs) {
  auto be = make_cpu_backend(2);
  RopeScaling prop;
  prop.type = "proportional";
  const RopeTable tab = rope_table_build({.n_rot = 32, .theta = 10000.0f, .scaling = prop, .neox = true, .proportion = 0.25f});
  const int32_t n_tok = 3, n_head = 2, hd = 32;
  std::vector<float> x(size_t(n_tok * n_head * hd)), want;
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * float(i)) + 0.1f;
  want = x;
  const std::vector<int32_t> pos = {0, 5, 900};
  be->rope({.x = {.data = x.data(), .rows = n_tok, .cols = n_head * hd}, .pos = pos.data(), .n_head = n_head,
            .head_dim = hd, .table = &tab});
  std::vector<float> r = want;
  ref::rope({.x = {.data = r.data(), .rows = n_tok, .cols = n_head * hd}, .pos = pos.data(), .n_head = n_head,
             .head_dim = hd, .table = &tab});
  for (int32_t t = 0; t < n_tok; ++t)
    for (int32_t h = 0; h < n_head; ++h)
      for (int32_t d = 0; d < hd; ++d) {
        const size_t i = size_t((t * n_head + h) * hd + d);
        EXPECT_NEAR(x[i], r[i], 1e-5f);
        if (d % 16 >= 4 || pos[size_t(t)] == 0) {
          EXPECT_EQ(x[i], want[i]) << t << " " << h << " " << d;
        }
      }
}

struct AttnCase {
  QuantType kv;
  int32_t n_head, n_head_kv, head_dim, window;
  float softcap;
};

// Which kernel runs: the environment switch that selects it (none: the best for this CPU).
class AttentionKernels : public ::testing::TestWithParam<const char*> {};

// Every kernel (scalar: BRISK_NO_SIMD=1; AVX2: BRISK_NO_AVX512=1; AVX-512 where the CPU has
// them) against the reference, over several tiles of 16 positions.
TEST_P(AttentionKernels, MatchReferenceWithGqaWindowsAndCacheTypes) {
  const char* env = GetParam();
  if (*env) setenv(env, "1", 1);
  flags_reload();
  const std::vector<AttnCase> cases = {
      {QuantType::F32, 4, 2, 16, 0, 0.0f}, {QuantType::F32, 4, 4, 32, 0, 0.0f},
      {QuantType::F16, 4, 1, 32, 0, 0.0f}, {QuantType::F16, 2, 2, 64, 5, 0.0f},
      {QuantType::Q8_0, 4, 2, 32, 0, 0.0f}, {QuantType::Q8_0, 8, 2, 64, 3, 0.0f},
      {QuantType::F32, 4, 2, 16, 0, 2.0f}, {QuantType::F16, 7, 1, 64, 0, 0.0f},
      {QuantType::F16, 14, 2, 128, 20, 0.0f}, {QuantType::F16, 4, 2, 256, 0, 30.0f},
      {QuantType::Q8_0, 6, 3, 128, 0, 0.0f},  {QuantType::BF16, 4, 2, 64, 0, 0.0f},
      {QuantType::BF16, 8, 1, 128, 7, 0.0f},  {QuantType::BF16, 4, 4, 32, 0, 5.0f},
  };
  for (int threads : {1, 2}) {
    auto be = make_cpu_backend(threads);
    for (const AttnCase& c : cases) {
     for (bool tiled : {false, true}) {
      if (tiled && c.kv != QuantType::F16) continue;
      const int64_t width = int64_t(c.n_head_kv) * c.head_dim;
      const int64_t cap = 40, n_seq = 2;
      const testing::HostKv pool =
          testing::make_host_kv(c.kv, width, cap, n_seq, 16, testing::KvLayout::scrambled, 0, tiled);
      const KvView kc = pool.kc, vc = pool.vc;
      // Sequence 0 holds 37 positions, sequence 1 holds 7; the batch queries a mix.
      std::vector<int32_t> seq, pos;
      for (int32_t p = 0; p < 37; ++p) { seq.push_back(0); pos.push_back(p); }
      for (int32_t p = 0; p < 7; ++p) { seq.push_back(1); pos.push_back(p); }
      const int64_t n = int64_t(seq.size());
      std::vector<float> k = random_vec(size_t(n * width), 11), v = random_vec(size_t(n * width), 12);
      be->kv_store({.k = mat(k, n, width), .v = mat(v, n, width), .k_cache = kc, .v_cache = vc,
                    .seq = seq.data(), .pos = pos.data()});
      const int64_t qw = int64_t(c.n_head) * c.head_dim;
      std::vector<float> q = random_vec(size_t(n * qw), 13, 2.0f), got(size_t(n * qw)), want(got.size());
      AttentionArgs a{.out = mat(got, n, qw), .q = mat(q, n, qw), .k_cache = kc, .v_cache = vc,
                      .seq = seq.data(), .pos = pos.data(), .n_head = c.n_head, .n_head_kv = c.n_head_kv,
                      .head_dim = c.head_dim, .scale = 1.0f / std::sqrt(float(c.head_dim)),
                      .window = c.window, .softcap = c.softcap};
      be->attention(a);
      a.out = mat(want, n, qw);
      ref::attention(a);
      EXPECT_LT(max_abs_diff(got, want), 2e-5f) << (*env ? env : "best") << " " << quant_type_info(c.kv).name << " heads " << c.n_head << "/"
                                                << c.n_head_kv << " window " << c.window << " tiled " << tiled;
      // The first position of each sequence attends only to itself: output == its V head.
      for (int32_t h = 0; h < c.n_head; ++h) {
        const int32_t kvh = h / (c.n_head / c.n_head_kv);
        std::vector<float> vrow(static_cast<size_t>(width));
        cpu::row_to_f32(c.kv, vc.row(0, 0), vrow.data(), width);
        for (int32_t i = 0; i < c.head_dim; ++i)
          EXPECT_NEAR(got[size_t(h * c.head_dim + i)], vrow[size_t(kvh * c.head_dim + i)], 1e-5f);
      }
     }
    }
  }
  if (*env) unsetenv(env);
  flags_reload();
}

// Bidirectional attention (AttentionArgs::first: an embedding model's decoder): each token sees
// [first, pos] of its sequence, positions after its own included, in every kernel, against the
// reference and against the softmax written out here.
TEST_P(AttentionKernels, BidirectionalRangesMatchReference) {
  const char* env = GetParam();
  if (*env) setenv(env, "1", 1);
  flags_reload();
  const std::vector<AttnCase> cases = {{QuantType::F32, 4, 2, 16, 0, 0.0f}, {QuantType::F32, 4, 2, 16, 6, 0.0f},
                                       {QuantType::F16, 8, 2, 64, 0, 0.0f}, {QuantType::F16, 4, 1, 128, 9, 0.0f},
                                       {QuantType::F32, 2, 2, 32, 3, 0.0f}};
  for (int threads : {1, 2}) {
    auto be = make_cpu_backend(threads);
    for (const AttnCase& c : cases) {
      const int64_t width = int64_t(c.n_head_kv) * c.head_dim;
      const testing::HostKv pool = testing::make_host_kv(c.kv, width, 40, 2, 16, testing::KvLayout::scrambled, 0, false);
      const int32_t len[2] = {37, 7};
      std::vector<int32_t> seq, pos, first, last;
      for (int32_t s = 0; s < 2; ++s)
        for (int32_t p = 0; p < len[s]; ++p) {
          seq.push_back(s);
          pos.push_back(p);
          // window w here: w positions either side; 0: the whole sequence.
          first.push_back(c.window > 0 ? std::max(0, p - c.window) : 0);
          last.push_back(c.window > 0 ? std::min(len[s] - 1, p + c.window) : len[s] - 1);
        }
      const int64_t n = int64_t(seq.size());
      std::vector<float> k = random_vec(size_t(n * width), 21), v = random_vec(size_t(n * width), 22);
      be->kv_store({.k = mat(k, n, width), .v = mat(v, n, width), .k_cache = pool.kc, .v_cache = pool.vc,
                    .seq = seq.data(), .pos = pos.data()});
      const int64_t qw = int64_t(c.n_head) * c.head_dim;
      std::vector<float> q = random_vec(size_t(n * qw), 23, 2.0f), got(size_t(n * qw)), want(got.size());
      const float scale = 1.0f / std::sqrt(float(c.head_dim));
      AttentionArgs a{.out = mat(got, n, qw), .q = mat(q, n, qw), .k_cache = pool.kc, .v_cache = pool.vc,
                      .seq = seq.data(), .pos = last.data(), .first = first.data(), .n_head = c.n_head,
                      .n_head_kv = c.n_head_kv, .head_dim = c.head_dim, .scale = scale};
      be->attention(a);
      a.out = mat(want, n, qw);
      ref::attention(a);
      const std::string what = std::string(*env ? env : "best") + " " + std::string(quant_type_info(c.kv).name) + " window " +
                               std::to_string(c.window) + " threads " + std::to_string(threads);
      EXPECT_LT(max_abs_diff(got, want), 2e-5f) << what;
      if (c.kv != QuantType::F32) continue;
      // Written out: row r of k / v is (seq, pos) in batch order.
      const int32_t group = c.n_head / c.n_head_kv;
      float worst = 0.0f;
      for (int64_t t = 0; t < n; ++t)
        for (int32_t h = 0; h < c.n_head; ++h) {
          const int64_t base = seq[size_t(t)] == 0 ? 0 : len[0], kcol = int64_t(h / group) * c.head_dim;
          std::vector<double> w;
          double mx = -1e300, sum = 0.0;
          for (int32_t j = first[size_t(t)]; j <= last[size_t(t)]; ++j) {
            double d = 0.0;
            for (int32_t i = 0; i < c.head_dim; ++i)
              d += double(q[size_t(t * qw + h * c.head_dim + i)]) * double(k[size_t((base + j) * width + kcol + i)]);
            w.push_back(d * scale);
            mx = std::max(mx, w.back());
          }
          for (double& x : w) sum += (x = std::exp(x - mx));
          for (int32_t i = 0; i < c.head_dim; ++i) {
            double o = 0.0;
            for (int32_t j = first[size_t(t)]; j <= last[size_t(t)]; ++j)
              o += w[size_t(j - first[size_t(t)])] * double(v[size_t((base + j) * width + kcol + i)]);
            worst = std::max(worst, float(std::fabs(o / sum - got[size_t(t * qw + h * c.head_dim + i)])));
          }
        }
      EXPECT_LT(worst, 2e-5f) << what << ": against the softmax written out";
    }
  }
  if (*env) unsetenv(env);
  flags_reload();
}

// One decode token over a long cache: with several threads and few KV heads the AVX-512 kernel
// splits the positions over the threads and merges the partial softmax results. Against the
// reference for lengths with partial tiles, windows, softcap, F16 / BF16 / F32 / Q8_0 caches, GQA.
// F16 caches with head_dim 64 / 128 score with the pair layout unless BRISK_NO_ATTN_PAIRS, tiled ones
// (KvView::tiled) column by column.
TEST_P(AttentionKernels, SplitDecodeOverLongContextsMatchesReference) {
  const char* env = GetParam();
  if (*env) setenv(env, "1", 1);
  flags_reload();
  const std::vector<AttnCase> cases = {
      {QuantType::F16, 14, 2, 64, 0, 0.0f},   {QuantType::F16, 8, 1, 128, 0, 0.0f},
      {QuantType::F32, 4, 2, 64, 700, 0.0f},  {QuantType::Q8_0, 6, 3, 128, 0, 0.0f},
      {QuantType::F16, 4, 2, 256, 0, 30.0f},  {QuantType::F16, 14, 2, 64, 700, 0.0f},
      {QuantType::F16, 3, 1, 128, 0, 0.0f},   {QuantType::F16, 4, 2, 32, 0, 0.0f},
      {QuantType::F16, 4, 2, 16, 300, 0.0f},  {QuantType::BF16, 8, 2, 128, 0, 0.0f},
      {QuantType::BF16, 4, 1, 64, 700, 0.0f},
  };
  for (int threads : {2, 3}) {
    auto be = make_cpu_backend(threads);
    for (const AttnCase& c : cases) {
      for (int32_t p : {511, 1000, 2049}) {
       for (bool tiled : {false, true}) {
        if (tiled && c.kv != QuantType::F16) continue;
        const int64_t width = int64_t(c.n_head_kv) * c.head_dim, cap = p + 1;
        const testing::HostKv pool =
            testing::make_host_kv(c.kv, width, cap, 1, 256, testing::KvLayout::contiguous, 0, tiled);
        const KvView kc = pool.kc, vc = pool.vc;
        const size_t n_rows = static_cast<size_t>(cap);
        std::vector<int32_t> seq(n_rows, 0), pos(n_rows);
        for (int32_t i = 0; i < int32_t(cap); ++i) pos[size_t(i)] = i;
        std::vector<float> k = random_vec(size_t(cap * width), 21), v = random_vec(size_t(cap * width), 22);
        be->kv_store({.k = mat(k, cap, width), .v = mat(v, cap, width), .k_cache = kc, .v_cache = vc,
                      .seq = seq.data(), .pos = pos.data()});
        const int64_t qw = int64_t(c.n_head) * c.head_dim;
        const size_t n_q = static_cast<size_t>(qw);
        std::vector<float> q = random_vec(n_q, 23, 2.0f), got(n_q), want(n_q);
        const int32_t s0 = 0;
        AttentionArgs a{.out = mat(got, 1, qw), .q = mat(q, 1, qw), .k_cache = kc, .v_cache = vc,
                        .seq = &s0, .pos = &p, .n_head = c.n_head, .n_head_kv = c.n_head_kv,
                        .head_dim = c.head_dim, .scale = 1.0f / std::sqrt(float(c.head_dim)),
                        .window = c.window, .softcap = c.softcap};
        be->attention(a);
        a.out = mat(want, 1, qw);
        ref::attention(a);
        EXPECT_LT(max_abs_diff(got, want), 2e-5f) << quant_type_info(c.kv).name << " heads " << c.n_head << "/"
                                                  << c.n_head_kv << " hd " << c.head_dim << " pos " << p
                                                  << " window " << c.window << " threads " << threads << " "
                                                  << (*env ? env : "best") << " tiled " << tiled;
       }
      }
    }
  }
  if (*env) unsetenv(env);
  flags_reload();
}

INSTANTIATE_TEST_SUITE_P(Ops, AttentionKernels,
                         ::testing::Values("", "BRISK_NO_ATTN_PAIRS", "BRISK_NO_AVX512", "BRISK_NO_SIMD"),
                         [](const auto& info) {
                           const std::string e = info.param;
                           return e.empty()                    ? std::string("best")
                                  : e == "BRISK_NO_ATTN_PAIRS" ? "no_pairs"
                                  : e == "BRISK_NO_AVX512"     ? "no_avx512"
                                                               : "no_simd";
                         });

// The attention kernels' split of (token, head) items over threads: every item in exactly one
// part, parts contiguous and in order, and for a causal prefill parts of about equal cost (the
// even split by item count gave the last part of 512 tokens three times the first one's work).
TEST(Ops, AttentionItemSplitCoversItemsWithBalancedCost) {
  for (int32_t window : {0, 100}) {
    for (int64_t n_tok : {1, 2, 7, 512}) {
      std::vector<int32_t> pos(static_cast<size_t>(n_tok)), seq(static_cast<size_t>(n_tok), 0);
      for (int64_t t = 0; t < n_tok; ++t) pos[size_t(t)] = int32_t(300 + t);
      AttentionArgs a;
      a.q.rows = n_tok;
      a.pos = pos.data();
      a.seq = seq.data();
      a.window = window;
      for (int64_t per_token : {1, 2, 14}) {
        for (int nth : {1, 2, 3, 5}) {
          const int64_t n = n_tok * per_token;
          int64_t next = 0;
          std::vector<double> part_cost;
          for (int ith = 0; ith < nth; ++ith) {
            int64_t b = -1, e = -1;
            cpu::attention_split_items(a, per_token, ith, nth, &b, &e);
            ASSERT_EQ(b, next) << "part " << ith << " of " << nth;
            ASSERT_LE(b, e);
            double c = 0.0;
            for (int64_t i = b; i < e; ++i) {
              const int64_t p = pos[size_t(i / per_token)];
              c += double(window > 0 ? std::min<int64_t>(p + 1, window) : p + 1);
            }
            part_cost.push_back(c);
            next = e;
          }
          ASSERT_EQ(next, n);
          if (n_tok == 512 && nth == 2) {
            const double hi = std::max(part_cost[0], part_cost[1]), lo = std::min(part_cost[0], part_cost[1]);
            EXPECT_LT(hi / lo, 1.05) << "window " << window << ", " << per_token << " items per token";
          }
        }
      }
    }
  }
}

TEST(Ops, GatedActivationsAddEmbeddingGetRows) {
  auto be = make_cpu_backend(2);
  const int64_t rows = 6, cols = 37;
  std::vector<float> g = random_vec(size_t(rows * cols), 21, 3.0f), u = random_vec(size_t(rows * cols), 22);
  for (Activation act : {Activation::silu, Activation::gelu_tanh}) {
    std::vector<float> got(g.size()), want(g.size());
    GatedActArgs a{.out = mat(got, rows, cols), .gate = mat(g, rows, cols), .up = mat(u, rows, cols), .act = act};
    be->gated_act(a);
    a.out = mat(want, rows, cols);
    ref::gated_act(a);
    EXPECT_LT(max_abs_diff(got, want), 1e-5f);
    // Gates far into the tails (exp under- and overflow), relative to the output's size.
    std::vector<float> big = random_vec(size_t(rows * cols), 23, 120.0f), one(big.size(), 1.0f);
    a = {.out = mat(got, rows, cols), .gate = mat(big, rows, cols), .up = mat(one, rows, cols), .act = act};
    be->gated_act(a);
    a.out = mat(want, rows, cols);
    ref::gated_act(a);
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i])));
  }
  EXPECT_NEAR(cpu::silu(1.0f), 0.7310585786f, 1e-6f);
  EXPECT_NEAR(cpu::gelu_tanh(1.0f), 0.8411919906f, 1e-6f);
  std::vector<float> sum(g.size()), want(g.size());
  be->add({.out = mat(sum, rows, cols), .a = mat(g, rows, cols), .b = mat(u, rows, cols)});
  ref::add({.out = mat(want, rows, cols), .a = mat(g, rows, cols), .b = mat(u, rows, cols)});
  EXPECT_EQ(sum, want);

  for (QuantType t : {QuantType::F32, QuantType::F16, QuantType::BF16, QuantType::Q8_0, QuantType::Q4_K}) {
    const int64_t n_embd = 256, n_vocab = 10;
    bool ok;
    std::vector<uint8_t> table = make_weight(t, n_embd, n_vocab, 31, &ok);
    const Weight w{.type = t, .n_in = n_embd, .n_out = n_vocab,
                   .row_bytes = size_t(quant_row_bytes(t, n_embd).value()), .data = table.data()};
    std::vector<int32_t> ids = {3, 0, 9, 3};
    std::vector<float> e(4 * n_embd), er(4 * n_embd);
    be->embedding({.out = mat(e, 4, n_embd), .table = w, .ids = ids.data(), .scale = 2.0f});
    ref::embedding({.out = mat(er, 4, n_embd), .table = w, .ids = ids.data(), .scale = 2.0f});
    EXPECT_EQ(e, er) << quant_type_info(t).name;
  }
  std::vector<int32_t> pick = {5, 0};
  std::vector<float> picked(size_t(2 * cols));
  be->get_rows({.out = mat(picked, 2, cols), .x = mat(g, rows, cols), .rows = pick.data()});
  for (int64_t i = 0; i < cols; ++i) {
    EXPECT_EQ(picked[size_t(i)], g[size_t(5 * cols + i)]);
    EXPECT_EQ(picked[size_t(cols + i)], g[size_t(i)]);
  }
}

TEST(Ops, SoftmaxReference) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f, -INFINITY};
  ref::softmax(x.data(), 4);
  EXPECT_NEAR(x[0] + x[1] + x[2], 1.0f, 1e-6f);
  EXPECT_EQ(x[3], 0.0f);
  EXPECT_NEAR(x[2] / x[1], std::exp(1.0f), 1e-5f);
}

TEST(Ops, ShapeMismatchIsAnError) {
  auto be = make_cpu_backend(1);
  std::vector<float> x(64), out(8);
  std::vector<float> w(64 * 4);
  const Weight wt{.type = QuantType::F32, .n_in = 64, .n_out = 4, .row_bytes = 256, .data = w.data()};
  EXPECT_THROW(be->matmul({.out = mat(out, 1, 8), .x = mat(x, 1, 64), .w = wt}), Error);
}

}  // namespace
}  // namespace brisk
