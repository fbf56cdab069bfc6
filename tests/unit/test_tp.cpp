// Tensor parallelism on the CPU (runtime/tp_context.h, models/tp_shard.h): weight slices against
// the full product, refused splits, and the fixture models split over 2 CPU ranks against one.
// Tolerance of the logits: the ranks' partial sums of the attention output and MLP down
// projection are added in another order than one backend's dot products (F32 weights: a few
// ULPs per layer), so |logit(tp 2) - logit(tp 1)| <= 1e-4 * max(1, max |logit|); greedy ids are
// identical. A world of 1 goes through the same runner and shard code and must match the plain
// context bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <thread>

#include "random_values.h"
#include "backend/backend.h"
#include "backend/tp_comm.h"
#include "core/error.h"
#include "kernels/cpu/ops.h"
#include "model_fixtures.h"
#include "tp_greedy.h"
#include "models/tp_shard.h"
#include "quant/repack.h"
#include "runtime/engine_api.h"
#include "runtime/tp_context.h"

namespace brisk::test {
namespace {

// A [n_out, n_in] matrix of random values stored as `type`, and its bytes.
struct TpMatrix {
  StoredTensor t;
  std::vector<uint8_t> bytes;
};

TpMatrix tp_random_matrix(QuantType type, int64_t n_in, int64_t n_out, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const size_t rb = size_t(*quant_row_bytes(type, uint64_t(n_in)));
  TpMatrix m;
  m.bytes.resize(rb * size_t(n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t r = 0; r < n_out; ++r) {
    for (float& v : row) v = u(rng);
    cpu::row_from_f32(type, row.data(), m.bytes.data() + size_t(r) * rb, n_in);
  }
  m.t = StoredTensor{.name = "blk.0.test.weight", .type = type, .ne = {n_in, n_out}, .data = m.bytes.data(),
                     .n_bytes = m.bytes.size()};
  return m;
}

Weight tp_weight_of(const StoredTensor& t) {
  return Weight{.type = t.type, .n_in = t.ne[0], .n_out = t.ne[1],
                .row_bytes = size_t(*quant_row_bytes(t.type, uint64_t(t.ne[0]))), .data = t.data};
}

// out [rows, w.n_out] = x . w^T on a CPU backend.
std::vector<float> tp_product(Backend& be, const std::vector<float>& x, int64_t rows, const Weight& w) {
  std::vector<float> in(x), out(size_t(rows * w.n_out));
  be.matmul({.out = Mat{.data = out.data(), .rows = rows, .cols = w.n_out},
             .x = Mat{.data = in.data(), .rows = rows, .cols = w.n_in}, .w = w});
  return out;
}

class TpSlice : public ::testing::TestWithParam<QuantType> {};

TEST_P(TpSlice, RowSliceGivesThoseRowsOfTheProduct) {
  const QuantType type = GetParam();
  const int64_t n_in = 512, n_out = 12, rows = 3;
  const TpMatrix m = tp_random_matrix(type, n_in, n_out, 1);
  const std::vector<float> x = test::uniform(size_t(rows * n_in), 2);
  auto be = make_cpu_backend(1);
  const std::vector<float> full = tp_product(*be, x, rows, tp_weight_of(m.t));
  const StoredTensor s = tp_slice_rows(m.t, 4, 6);
  ASSERT_EQ(s.ne[1], 6);
  const std::vector<float> part = tp_product(*be, x, rows, tp_weight_of(s));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < 6; ++j)
      EXPECT_EQ(part[size_t(r * 6 + j)], full[size_t(r * n_out + 4 + j)]) << "row " << r << " output " << j;
}

TEST_P(TpSlice, ColumnSlicesSumToTheProduct) {
  const QuantType type = GetParam();
  const int64_t n_in = 1024, n_out = 8, rows = 3, half = n_in / 2;
  const TpMatrix m = tp_random_matrix(type, n_in, n_out, 3);
  const std::vector<float> x = test::uniform(size_t(rows * n_in), 4);
  auto be = make_cpu_backend(1);
  const std::vector<float> full = tp_product(*be, x, rows, tp_weight_of(m.t));
  std::vector<float> sum(full.size(), 0.0f);
  for (int k = 0; k < 2; ++k) {
    std::vector<uint8_t> bytes;
    const StoredTensor s = tp_slice_cols(m.t, k * half, half, &bytes);
    ASSERT_EQ(s.ne[0], half);
    std::vector<float> xk(size_t(rows * half));
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(x.begin() + r * n_in + k * half, half, xk.begin() + r * half);
    const std::vector<float> part = tp_product(*be, xk, rows, tp_weight_of(s));
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  for (size_t i = 0; i < sum.size(); ++i)
    EXPECT_NEAR(sum[i], full[i], 1e-4f * std::max(1.0f, std::fabs(full[i]))) << "element " << i;
}

INSTANTIATE_TEST_SUITE_P(Types, TpSlice, ::testing::Values(QuantType::F32, QuantType::Q8_0, QuantType::Q4_K),
                         [](const auto& info) { return std::string(quant_type_info(info.param).name); });

TEST(TpSliceRefusal, ColumnsOffBlockBoundariesAreRefused) {
  const TpMatrix m = tp_random_matrix(QuantType::Q4_K, 512, 2, 5);
  std::vector<uint8_t> bytes;
  try {
    tp_slice_cols(m.t, 0, 128, &bytes);
    FAIL() << "a Q4_K column split inside a block was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block boundaries"), std::string::npos) << e.what();
  }
}

// A model first bound to a backend that repacks rows (the CPU's Q8_0_R16 on AVX-512): column
// slices come out in the stored format, the same bytes as from the stored matrix.
TEST(TpSliceRepacked, ColumnsOfARepackedMatrixAreTheStoredOnes) {
  const TpMatrix m = tp_random_matrix(QuantType::Q8_0, 1024, 4, 6);
  const auto repacked = quant::repacked_type(QuantType::Q8_0);
  ASSERT_TRUE(repacked.has_value());
  std::vector<uint8_t> packed = m.bytes;
  const size_t rb = size_t(*quant_row_bytes(QuantType::Q8_0, 1024));
  quant::repack_rows_in_place(QuantType::Q8_0, packed.data(), 4, rb, 1024 / 32);
  StoredTensor t = m.t;
  t.type = *repacked;
  t.data = packed.data();
  std::vector<uint8_t> from_stored, from_packed;
  const StoredTensor a = tp_slice_cols(m.t, 512, 512, &from_stored);
  const StoredTensor b = tp_slice_cols(t, 512, 512, &from_packed);
  EXPECT_EQ(b.type, QuantType::Q8_0);
  EXPECT_EQ(from_packed, from_stored);
  // Row slices keep the layout (it rearranges bytes within each row).
  EXPECT_EQ(tp_slice_rows(t, 1, 2).type, *repacked);
}

TEST(TpHostComm, SumsInRankOrderOnEveryRank) {
  constexpr int32_t kWorld = 3;
  HostComm comm(kWorld);
  std::vector<std::vector<float>> x(kWorld);
  for (int32_t r = 0; r < kWorld; ++r) x[size_t(r)] = {float(r + 1), 0.5f * float(r), -1.0f, 1e-8f * float(r)};
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> mine = x[size_t(r)];
      for (int rep = 0; rep < 3; ++rep)  // the group is reused call after call
        comm.all_reduce(r, Mat{.data = mine.data(), .rows = 2, .cols = 2});
      x[size_t(r)] = mine;
    });
  for (std::thread& t : threads) t.join();
  // Three reductions of the sums: each element is 3^2 times the first sum.
  const float want0 = 9.0f * (1.0f + 2.0f + 3.0f);
  for (int32_t r = 0; r < kWorld; ++r) {
    EXPECT_EQ(x[size_t(r)][0], want0);
    EXPECT_EQ(x[size_t(r)], x[0]) << "rank " << r << " differs from rank 0";
  }
}

TEST(TpHostComm, AbortWakesWaitingRanks) {
  HostComm comm(2);
  std::vector<float> v(4, 1.0f);
  std::thread waiter([&] {
    EXPECT_THROW(comm.all_reduce(0, Mat{.data = v.data(), .rows = 1, .cols = 4}), Error);
  });
  comm.abort();
  waiter.join();
}

ContextOptions tp_options(int32_t tp) {
  return {.n_ctx = 256, .n_seq_max = 1, .n_batch = 512, .kv_type = QuantType::F32, .n_threads = 2, .device = "cpu",
          .tp = tp};
}

void expect_error_mentions(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(TpSplit, BadSplitsAreRefused) {
  REQUIRE_MODEL("llama");  // 4 heads, 2 KV heads, MLP of 160 rows
  auto model = Model::load({.path = model_dir("llama") + "/model-f32.gguf"});
  expect_error_mentions([&] { Context::create(model, tp_options(3)); }, "4 attention heads do not split over 3 ranks");
  expect_error_mentions([&] { Context::create(model, tp_options(4)); }, "4 ranks need at least 4 KV heads, the model has 2");
  // Q8_0 blocks of 32: the MLP's 80 columns per rank are not whole blocks.
  auto q8 = Model::load({.path = model_dir("llama") + "/model-q8_0.gguf"});
  expect_error_mentions([&] { Context::create(q8, tp_options(2)); }, "do not fall on block boundaries");
  ContextOptions o = tp_options(0);
  o.tp = -1;
  expect_error_mentions([&] { tp_rank_devices(o); }, "--tp -1");
  o = tp_options(3);
  o.device = "cuda:0,1";
  expect_error_mentions([&] { tp_rank_devices(o); }, "names 2 GPUs");
  o = tp_options(2);
  o.device = "cuda:1";
  expect_error_mentions([&] { tp_rank_devices(o); }, "one GPU");
  o = tp_options(2);
  o.device = "cuda:0,0";
  expect_error_mentions([&] { tp_rank_devices(o); }, "twice");
  EXPECT_EQ(tp_rank_devices(tp_options(2)), (std::vector<std::string>{"cpu", "cpu"}));
}

TEST(TpSplit, OtherArchitecturesAreRefused) {
  REQUIRE_MODEL("gemma3");
  auto model = Model::load({.path = model_dir("gemma3") + "/hf"});
  expect_error_mentions([&] { Context::create(model, tp_options(1)); }, "is not supported");
}

class TpModel : public ::testing::TestWithParam<std::string> {};

TEST_P(TpModel, TwoCpuRanksMatchOne) {
  const std::string arch = GetParam();
  REQUIRE_MODEL(arch);
  for (const std::string file : {"/hf", "/model-f32.gguf"}) {
    SCOPED_TRACE(arch + file);
    auto model = Model::load({.path = model_dir(arch) + file});
    const std::vector<int32_t> prompt = {1, 15, 200, 31, 7, 512, 99, 3};
    std::vector<std::vector<float>> l1, lw1, l2;
    auto plain = Context::create(model, tp_options(0));
    const std::vector<int32_t> g1 = tp_greedy(*plain, prompt, 32, &l1);
    auto one = Context::create(model, tp_options(1));
    EXPECT_EQ(one->options().tp, 1);
    const std::vector<int32_t> gw1 = tp_greedy(*one, prompt, 32, &lw1);
    auto two = Context::create(model, tp_options(2));
    EXPECT_EQ(two->options().tp, 2);
    EXPECT_EQ(two->options().n_threads, 2);
    const std::vector<int32_t> g2 = tp_greedy(*two, prompt, 32, &l2);
    EXPECT_EQ(gw1, g1) << "a world of 1 changed the greedy ids";
    EXPECT_EQ(g2, g1) << "2 ranks changed the greedy ids";
    for (size_t s = 0; s < l1.size(); ++s)
      EXPECT_EQ(lw1[s], l1[s]) << "a world of 1 changed the logits of step " << s;
    EXPECT_LE(tp_worst_difference(l1, l2), 1e-4f)
        << "largest logit difference (relative to the largest logit) of 2 ranks vs 1";
    // Sequence operations reach every rank: cut back and decode again, same logits as before.
    two->seq_truncate(0, int32_t(prompt.size()));
    two->decode({{.token = g2[0], .pos = int32_t(prompt.size()), .seq = 0, .want_logits = true}});
    const float* again = two->logits(0);
    for (size_t i = 0; i < l2[1].size(); ++i) ASSERT_EQ(again[i], l2[1][i]) << "after seq_truncate, token " << i;
    // A bad batch is refused before any rank runs, and the context stays usable.
    EXPECT_THROW(two->decode({{.token = 1, .pos = 99, .seq = 0, .want_logits = true}}), Error);
    two->decode({{.token = 1, .pos = int32_t(prompt.size()) + 1, .seq = 0, .want_logits = true}});
  }
}

INSTANTIATE_TEST_SUITE_P(Models, TpModel, ::testing::Values("llama", "mistral", "qwen2", "qwen3", "qwen3_moe"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace brisk::test
