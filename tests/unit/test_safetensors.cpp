// safetensors reader: dtypes and to_f32, header validation, folders and sharded checkpoints,
// the real tiny checkpoints under shared data, and hostile headers.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "required_assets.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "test_gguf_util.h"

namespace brisk {
namespace {

namespace st = safetensors;
namespace fs = std::filesystem;

// Builds a safetensors file from a header JSON and a data blob.
std::vector<uint8_t> build(const nlohmann::json& header, const std::vector<uint8_t>& data,
                           size_t header_pad = 0) {
  std::string h = header.dump();
  h.append(header_pad, ' ');
  std::vector<uint8_t> out(8 + h.size() + data.size());
  const uint64_t n = h.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, h.data(), h.size());
  if (!data.empty()) std::memcpy(out.data() + 8 + h.size(), data.data(), data.size());
  return out;
}

st::Checkpoint parse(const std::vector<uint8_t>& b) {
  return st::Checkpoint::parse(MappedFile::from_memory(b.data(), b.size(), "t.safetensors"));
}

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    parse(b);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

template <class T>
void append(std::vector<uint8_t>& out, const std::vector<T>& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  out.insert(out.end(), p, p + v.size() * sizeof(T));
}

TEST(SafetensorsParse, EveryDtypeConvertsToF32) {
  std::vector<uint8_t> data;
  nlohmann::json h;
  auto add = [&](const std::string& name, const std::string& dtype, std::vector<uint64_t> shape,
                 const std::vector<uint8_t>& bytes) {
    h[name] = {{"dtype", dtype}, {"shape", shape},
               {"data_offsets", {data.size(), data.size() + bytes.size()}}};
    data.insert(data.end(), bytes.begin(), bytes.end());
  };
  auto bytes_of = [](auto v) {
    std::vector<uint8_t> b;
    append(b, v);
    return b;
  };
  add("f64", "F64", {2}, bytes_of(std::vector<double>{1.25, -3.0}));
  add("f32", "F32", {1, 2}, bytes_of(std::vector<float>{0.5f, -7.0f}));
  add("f16", "F16", {2}, bytes_of(std::vector<uint16_t>{0x3c00, 0xc000}));   // 1, -2
  add("bf16", "BF16", {2}, bytes_of(std::vector<uint16_t>{0x3f80, 0x4040}));  // 1, 3
  // E4M3: 0x7e = 448 (max), 0x01 = 2^-9 (min subnormal), 0xb8 = -1, 0x7f = NaN.
  add("e4m3", "F8_E4M3", {4}, {0x7e, 0x01, 0xb8, 0x7f});
  // E5M2: 0x7b = 57344 (max), 0x3c = 1, 0x7c = inf, 0x01 = 2^-16.
  add("e5m2", "F8_E5M2", {4}, {0x7b, 0x3c, 0x7c, 0x01});
  add("i64", "I64", {1}, bytes_of(std::vector<int64_t>{-5}));
  add("i32", "I32", {1}, bytes_of(std::vector<int32_t>{-6}));
  add("i16", "I16", {1}, bytes_of(std::vector<int16_t>{-7}));
  add("i8", "I8", {1}, {0xf8});
  add("u64", "U64", {1}, bytes_of(std::vector<uint64_t>{9}));
  add("u32", "U32", {1}, bytes_of(std::vector<uint32_t>{10}));
  add("u16", "U16", {1}, bytes_of(std::vector<uint16_t>{11}));
  add("u8", "U8", {1}, {200});
  add("bool", "BOOL", {3}, {1, 0, 1});
  add("scalar", "F32", {}, bytes_of(std::vector<float>{2.5f}));
  add("empty", "F32", {0, 4}, {});
  h["__metadata__"] = {{"format", "pt"}};
  const auto c = parse(build(h, data, 5));
  EXPECT_EQ(c.tensors().size(), 17u);
  EXPECT_EQ(c.metadata().at("format"), "pt");
  auto f = [&](const char* n) { return st::to_f32(*c.find(n)); };
  EXPECT_EQ(f("f64"), (std::vector<float>{1.25f, -3.0f}));
  EXPECT_EQ(f("f32"), (std::vector<float>{0.5f, -7.0f}));
  EXPECT_EQ(f("f16"), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(f("bf16"), (std::vector<float>{1.0f, 3.0f}));
  const auto e4 = f("e4m3");
  EXPECT_EQ(e4[0], 448.0f);
  EXPECT_EQ(e4[1], std::ldexp(1.0f, -9));
  EXPECT_EQ(e4[2], -1.0f);
  EXPECT_TRUE(std::isnan(e4[3]));
  const auto e5 = f("e5m2");
  EXPECT_EQ(e5[0], 57344.0f);
  EXPECT_EQ(e5[1], 1.0f);
  EXPECT_TRUE(std::isinf(e5[2]));
  EXPECT_EQ(e5[3], std::ldexp(1.0f, -16));
  EXPECT_EQ(f("i64"), std::vector<float>{-5});
  EXPECT_EQ(f("i32"), std::vector<float>{-6});
  EXPECT_EQ(f("i16"), std::vector<float>{-7});
  EXPECT_EQ(f("i8"), std::vector<float>{-8});
  EXPECT_EQ(f("u64"), std::vector<float>{9});
  EXPECT_EQ(f("u32"), std::vector<float>{10});
  EXPECT_EQ(f("u16"), std::vector<float>{11});
  EXPECT_EQ(f("u8"), std::vector<float>{200});
  EXPECT_EQ(f("bool"), (std::vector<float>{1, 0, 1}));
  EXPECT_EQ(f("scalar"), std::vector<float>{2.5f});
  EXPECT_TRUE(f("empty").empty());
  const st::TensorInfo* t = c.find("f32");
  EXPECT_EQ(t->shape, (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(t->n_elements, 2u);
  EXPECT_EQ(t->n_bytes, 8u);
  EXPECT_EQ(st::dtype_size(st::DType::BF16), 2u);
  EXPECT_EQ(st::dtype_name(st::DType::F8_E4M3), "F8_E4M3");
  EXPECT_EQ(c.find("absent"), nullptr);
}

TEST(SafetensorsParse, HostileHeadersAreRejected) {
  const std::vector<uint8_t> four_floats(16, 0);
  auto one = [](const nlohmann::json& entry) { return nlohmann::json{{"w", entry}}; };
  struct Case {
    const char* what;
    std::vector<uint8_t> bytes;
    const char* expect;
  };
  std::vector<uint8_t> huge_len(16, 0);
  const uint64_t big = 1ull << 40;
  std::memcpy(huge_len.data(), &big, 8);
  std::vector<uint8_t> past_end(16, 0);
  const uint64_t nine = 9;
  std::memcpy(past_end.data(), &nine, 8);
  const std::vector<Case> cases = {
      {"too short", {1, 2, 3}, "too short"},
      {"header length over limit", huge_len, "exceeds the 100 MB limit"},
      {"header length past end", past_end, "header length 9 exceeds the 8 bytes"},
      {"not json", build(nlohmann::json::array(), {}), "not a JSON object"},
      {"bad json", [] { auto b = build(nlohmann::json::object(), {}); b[8] = '['; return b; }(),
       "not valid JSON"},
      {"bad dtype", build(one({{"dtype", "F4"}, {"shape", {4}}, {"data_offsets", {0, 16}}}), four_floats),
       "unsupported dtype 'F4'"},
      {"shape mismatch", build(one({{"dtype", "F32"}, {"shape", {3}}, {"data_offsets", {0, 16}}}), four_floats),
       "spans 16 bytes but shape"},
      {"end past data", build(one({{"dtype", "F32"}, {"shape", {8}}, {"data_offsets", {0, 32}}}), four_floats),
       "exceeds the 16-byte data section"},
      {"reversed", build(one({{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {16, 0}}}), four_floats),
       "reversed"},
      {"negative shape", build(one({{"dtype", "F32"}, {"shape", {-4}}, {"data_offsets", {0, 16}}}), four_floats),
       "not a non-negative integer"},
      {"overflow shape",
       build(one({{"dtype", "F64"}, {"shape", {1ull << 32, 1ull << 31, 4}}, {"data_offsets", {0, 16}}}), four_floats),
       "overflows"},
      {"missing offsets", build(one({{"dtype", "F32"}, {"shape", {4}}}), four_floats), "data_offsets"},
      {"trailing bytes", build(one({{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}), four_floats),
       "8 bytes after the last tensor"},
      {"gap",
       build({{"a", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0, 4}}}},
              {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}}, four_floats),
       "leaving a gap"},
      {"overlap",
       build({{"a", {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}}},
              {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}}, four_floats),
       "overlapping"},
      {"metadata not strings", build({{"__metadata__", {{"k", 1}}}}, {}), "__metadata__ value 'k'"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.bytes);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": got '" << msg << "'";
    EXPECT_EQ(msg.rfind("t.safetensors: offset ", 0), 0u) << c.what << ": " << msg;
  }
}

TEST(SafetensorsParse, TruncationsAndFlipsOnlyThrowBriskError) {
  std::vector<uint8_t> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
  const auto full = build({{"a", {{"dtype", "F32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}}},
                           {"b", {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {16, 24}}}}},
                          data);
  ASSERT_EQ(error_of(full), "");
  for (size_t n = 0; n < full.size(); ++n)
    EXPECT_NE(error_of(std::vector<uint8_t>(full.begin(), full.begin() + n)), "") << n;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 2000; ++round) {
    auto b = full;
    b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
    try {
      const auto c = parse(b);
      for (const auto& t : c.tensors()) st::to_f32(t);
    } catch (const Error&) {
    }  // any other exception type fails the test
  }
}

class SafetensorsFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_path("ckpt");
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(SafetensorsFolder, ShardedIndexAndSingleFileAndGlob) {
  std::vector<uint8_t> d1(8, 1), d2(4, 2);
  test::write_all(dir_ + "/model-00001-of-00002.safetensors",
                  build({{"x", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}}}, d1));
  test::write_all(dir_ + "/model-00002-of-00002.safetensors",
                  build({{"y", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}}, d2));
  // Without an index: every *.safetensors in the folder.
  auto c = st::Checkpoint::open(dir_);
  ASSERT_EQ(c.tensors().size(), 2u);
  EXPECT_NE(c.find("y")->file.find("00002"), std::string::npos);

  nlohmann::json index = {{"metadata", {{"total_size", 12}}},
                          {"weight_map", {{"x", "model-00001-of-00002.safetensors"},
                                          {"y", "model-00002-of-00002.safetensors"}}}};
  test::write_all(dir_ + "/model.safetensors.index.json",
                  [&] { auto s = index.dump(); return std::vector<uint8_t>(s.begin(), s.end()); }());
  for (const std::string& p : {dir_, dir_ + "/model.safetensors.index.json"}) {
    c = st::Checkpoint::open(p, MappedFile::Mode::read);
    ASSERT_EQ(c.tensors().size(), 2u);
    EXPECT_EQ(st::to_f32(*c.find("y")).size(), 2u);
    EXPECT_EQ(c.find("x")->data[0], 1);
  }
  // Index naming a tensor in the wrong shard, or escaping the folder.
  index["weight_map"]["x"] = "model-00002-of-00002.safetensors";
  auto write_index = [&] {
    const auto s = index.dump();
    test::write_all(dir_ + "/model.safetensors.index.json", std::vector<uint8_t>(s.begin(), s.end()));
  };
  write_index();
  EXPECT_THROW(st::Checkpoint::open(dir_), Error);
  index["weight_map"]["x"] = "../model-00001-of-00002.safetensors";
  write_index();
  EXPECT_THROW(st::Checkpoint::open(dir_), Error);
  index["weight_map"]["x"] = "missing.safetensors";
  write_index();
  EXPECT_THROW(st::Checkpoint::open(dir_), Error);
  // The same tensor in two shards.
  fs::remove(dir_ + "/model.safetensors.index.json");
  test::write_all(dir_ + "/model-00002-of-00002.safetensors",
                  build({{"x", {{"dtype", "BF16"}, {"shape", {2}}, {"data_offsets", {0, 4}}}}}, d2));
  EXPECT_THROW(st::Checkpoint::open(dir_), Error);
  EXPECT_THROW(st::Checkpoint::open(dir_ + "/nothing-here"), Error);
}

TEST(SafetensorsRealFiles, TinyCheckpointsParseAndConvert) {
  std::vector<std::string> dirs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(test::shared_data() + "/models", ec))
    if (fs::exists(e.path() / "hf" / "model.safetensors")) dirs.push_back((e.path() / "hf").string());
  if (dirs.empty()) BRISK_SKIP_MISSING_ASSET() << "no safetensors checkpoints in " << test::shared_data() << "/models";
  for (const auto& dir : dirs) {
    SCOPED_TRACE(dir);
    const auto c = st::Checkpoint::open(dir);
    ASSERT_FALSE(c.tensors().empty());
    uint64_t params = 0;
    for (const auto& t : c.tensors()) {
      const auto v = st::to_f32(t);
      ASSERT_EQ(v.size(), t.n_elements);
      for (float x : v) ASSERT_TRUE(std::isfinite(x)) << t.name;
      params += t.n_elements;
    }
    EXPECT_GT(params, 100000u);
    const auto config = read_json_file(dir + "/config.json");
    EXPECT_TRUE(config.contains("architectures") || config.contains("model_type"));
  }
}

TEST(JsonFile, ErrorsNameTheFile) {
  const std::string p = test::temp_path("bad.json");
  test::write_all(p, {'{', '"', 'a', '"', ':'});
  try {
    read_json_file(p);
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_json_file(p + ".missing"), Error);
  test::write_all(p, {'[', '1', ']'});
  EXPECT_EQ(read_json_file(p), nlohmann::json::array({1}));
  fs::remove(p);
}

}  // namespace
}  // namespace brisk
