// GGUF reader and writer: round trip of every value type and several tensor types, and the
// real files under shared data (vocabularies and converted tiny models).
#include <cmath>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "required_assets.h"

#include "core/error.h"
#include "formats/gguf.h"
#include "test_gguf_util.h"

namespace brisk {
namespace {

using gguf::Array;
using gguf::Value;
using gguf::ValueType;

Value make(ValueType t, std::variant<uint64_t, int64_t, double, bool, std::string, Array> d) {
  return Value{.type = t, .data = std::move(d)};
}

// Walks every metadata value and tensor (what a consumer would touch); returns a checksum.
uint64_t walk(const gguf::File& f) {
  uint64_t sum = f.metadata().size();
  std::function<void(const Value&)> visit = [&](const Value& v) {
    sum += uint64_t(v.type);
    if (const Array* a = v.as_array())
      for (const auto& item : a->items) visit(item);
    if (const std::string* s = v.as_string()) sum += s->size();
  };
  for (const auto& [k, v] : f.metadata()) visit(v);
  for (const auto& t : f.tensors()) {
    if (t.n_bytes) sum += t.data[0] + t.data[t.n_bytes - 1];
    EXPECT_LE(f.data_offset() + t.offset + t.n_bytes, f.bytes()->size());
  }
  return sum;
}

TEST(GgufRoundTrip, EveryValueTypeAndNestedArrays) {
  gguf::Writer w;
  w.set("general.architecture", Value::from_string("testarch"));
  w.set("v.u8", make(ValueType::UINT8, uint64_t(250)));
  w.set("v.i8", make(ValueType::INT8, int64_t(-120)));
  w.set("v.u16", make(ValueType::UINT16, uint64_t(65000)));
  w.set("v.i16", make(ValueType::INT16, int64_t(-32000)));
  w.set("v.u32", Value::from_u32(4000000000u));
  w.set("v.i32", Value::from_i32(-2000000000));
  w.set("v.f32", Value::from_f32(1.5f));
  w.set("v.bool", Value::from_bool(true));
  w.set("v.string", Value::from_string(std::string("h\xc3\xa9llo\0x", 8)));
  w.set("v.u64", Value::from_u64(0xfedcba9876543210ull));
  w.set("v.i64", make(ValueType::INT64, int64_t(-(1ll << 62))));
  w.set("v.f64", make(ValueType::FLOAT64, 3.141592653589793));
  w.set("a.strings", Value::from_strings({"a", "", "ccc"}));
  w.set("a.f32", Value::from_f32s({0.5f, -2.0f}));
  w.set("a.i32", Value::from_i32s({1, -2, 3}));
  w.set("a.empty", Value::from_i32s({}));
  Array inner1{.type = ValueType::UINT8, .items = {make(ValueType::UINT8, uint64_t(7))}};
  Array inner2{.type = ValueType::UINT8, .items = {}};
  Array nested{.type = ValueType::ARRAY,
               .items = {make(ValueType::ARRAY, inner1), make(ValueType::ARRAY, inner2)}};
  w.set("a.nested", make(ValueType::ARRAY, nested));
  w.set("v.u8", make(ValueType::UINT8, uint64_t(251)));  // replaces, keeps position
  const std::string path = test::temp_path("values.gguf");
  w.write(path);

  const auto f = gguf::File::open(path);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.architecture(), "testarch");
  ASSERT_EQ(f.metadata().size(), 18u);
  EXPECT_EQ(f.metadata()[1].first, "v.u8");
  EXPECT_EQ(f.get_int("v.u8"), 251);
  EXPECT_EQ(f.find("v.u8")->type, ValueType::UINT8);
  EXPECT_EQ(f.get_int("v.i8"), -120);
  EXPECT_EQ(f.get_int("v.u16"), 65000);
  EXPECT_EQ(f.get_int("v.i16"), -32000);
  EXPECT_EQ(f.get_int("v.u32"), 4000000000ll);
  EXPECT_EQ(f.get_int("v.i32"), -2000000000);
  EXPECT_EQ(f.get_float("v.f32"), 1.5);
  EXPECT_EQ(f.get_bool("v.bool"), true);
  EXPECT_EQ(f.get_string("v.string"), std::string("h\xc3\xa9llo\0x", 8));
  EXPECT_EQ(f.find("v.u64")->as_int(), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(std::get<uint64_t>(f.find("v.u64")->data), 0xfedcba9876543210ull);
  EXPECT_EQ(f.get_int("v.i64"), -(1ll << 62));
  EXPECT_EQ(f.get_float("v.f64"), 3.141592653589793);
  EXPECT_EQ(f.find("v.f64")->type, ValueType::FLOAT64);
  EXPECT_EQ(f.get_string_array("a.strings"), (std::vector<std::string>{"a", "", "ccc"}));
  EXPECT_EQ(f.get_float_array("a.f32"), (std::vector<float>{0.5f, -2.0f}));
  EXPECT_EQ(f.get_int_array("a.i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(f.get_float_array("a.i32"), (std::vector<float>{1, -2, 3}));
  EXPECT_TRUE(f.get_int_array("a.empty").empty());
  EXPECT_TRUE(f.get_int_array("absent").empty());
  EXPECT_EQ(f.get_int("absent"), std::nullopt);
  const Array* a = f.find("a.nested")->as_array();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->type, ValueType::ARRAY);
  ASSERT_EQ(a->items.size(), 2u);
  EXPECT_EQ(a->items[0].as_array()->items.at(0).as_int(), 7);
  EXPECT_TRUE(a->items[1].as_array()->items.empty());
  // Wrong-type access is an error naming the key, not a silent default.
  EXPECT_THROW(f.get_string_array("a.i32"), Error);
  EXPECT_THROW(f.get_int_array("a.f32"), Error);
  EXPECT_THROW(f.get_string("v.u8"), Error);
  EXPECT_THROW(f.get_int("v.string"), Error);
  EXPECT_THROW(f.get_bool("v.u8"), Error);
  EXPECT_TRUE(f.tensors().empty());
  std::filesystem::remove(path);
}

TEST(GgufRoundTrip, TensorsOfSeveralTypesKeepBytesAndAlignment) {
  struct Case {
    std::string name;
    QuantType type;
    std::vector<uint64_t> ne;
  };
  const std::vector<Case> cases = {
      {"f32", QuantType::F32, {3, 5}},         {"f16", QuantType::F16, {7}},
      {"bf16", QuantType::BF16, {4, 2, 3}},    {"q8_0", QuantType::Q8_0, {64, 3}},
      {"q4_k", QuantType::Q4_K, {256, 2}},     {"q6_k", QuantType::Q6_K, {512, 1, 1, 2}},
      {"iq4_nl", QuantType::IQ4_NL, {32}},     {"i32", QuantType::I32, {1}},
  };
  for (uint64_t alignment : {32u, 64u, 8u}) {
    std::vector<std::vector<uint8_t>> payloads;
    gguf::Writer w;
    if (alignment != 32) w.set_alignment(alignment);
    for (size_t i = 0; i < cases.size(); ++i) {
      uint64_t n = *quant_row_bytes(cases[i].type, cases[i].ne[0]);
      for (size_t d = 1; d < cases[i].ne.size(); ++d) n *= cases[i].ne[d];
      payloads.emplace_back(n);
      for (uint64_t k = 0; k < n; ++k) payloads.back()[k] = uint8_t(k * 31 + i * 7 + 1);
    }
    for (size_t i = 0; i < cases.size(); ++i)
      w.add_tensor(cases[i].name, cases[i].type, cases[i].ne, payloads[i].data(),
                   payloads[i].size());
    const std::string path = test::temp_path("tensors.gguf");
    w.write(path);
    for (auto mode : {MappedFile::Mode::mmap, MappedFile::Mode::read}) {
      const auto f = gguf::File::open(path, mode);
      EXPECT_EQ(f.alignment(), alignment);
      EXPECT_EQ(f.data_offset() % alignment, 0u);
      ASSERT_EQ(f.tensors().size(), cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        const gguf::TensorInfo* t = f.find_tensor(cases[i].name);
        ASSERT_TRUE(t) << cases[i].name;
        EXPECT_EQ(t->type, cases[i].type);
        EXPECT_EQ(t->ne, cases[i].ne);
        EXPECT_EQ(t->offset % alignment, 0u);
        ASSERT_EQ(t->n_bytes, payloads[i].size());
        EXPECT_EQ(std::memcmp(t->data, payloads[i].data(), t->n_bytes), 0) << cases[i].name;
        uint64_t n_el = 1;
        for (auto d : cases[i].ne) n_el *= d;
        EXPECT_EQ(t->n_elements, n_el);
      }
    }
    std::filesystem::remove(path);
  }
}

TEST(GgufWriter, RejectsInconsistentTensors) {
  gguf::Writer w;
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(w.add_tensor("a", QuantType::Q8_0, {33}, buf.data(), 36), Error);  // not a block
  EXPECT_THROW(w.add_tensor("a", QuantType::F32, {4}, buf.data(), 15), Error);    // wrong bytes
  EXPECT_THROW(w.add_tensor("a", QuantType::F32, {1, 1, 1, 1, 1}, buf.data(), 4), Error);
  EXPECT_THROW(w.add_tensor("a", QuantType::F32, {}, buf.data(), 4), Error);
  w.add_tensor("a", QuantType::F32, {4}, buf.data(), 16);
  EXPECT_THROW(w.add_tensor("a", QuantType::F32, {4}, buf.data(), 16), Error);  // duplicate
  EXPECT_THROW(w.set_alignment(24), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'n'), QuantType::F32, {4}, buf.data(), 16), Error);
  gguf::Writer w2;
  w2.set("big", make(ValueType::UINT8, uint64_t(256)));
  EXPECT_THROW(w2.write(test::temp_path("big.gguf")), Error);
  w2.set("big", make(ValueType::INT8, int64_t(-129)));
  EXPECT_THROW(w2.write(test::temp_path("big.gguf")), Error);
  w2.set("big", make(ValueType::UINT64, int64_t(-1)));
  EXPECT_THROW(w2.write(test::temp_path("big.gguf")), Error);
  Array bad{.type = ValueType::INT32, .items = {Value::from_string("x")}};
  w.set("bad", Value{.type = ValueType::ARRAY, .data = bad});
  EXPECT_THROW(w.write(test::temp_path("bad.gguf")), Error);
}

TEST(GgufRealFiles, VocabFilesParse) {
  const auto files = test::shared_files("vocab", ".gguf");
  if (files.empty()) BRISK_SKIP_MISSING_ASSET() << "no GGUF files in " << test::shared_data() << "/vocab";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    const auto f = gguf::File::open(path);
    EXPECT_TRUE(f.version() == 2 || f.version() == 3);
    const auto tokens = f.get_string_array("tokenizer.ggml.tokens");
    EXPECT_GT(tokens.size(), 1000u);
    EXPECT_TRUE(f.get_string("tokenizer.ggml.model").has_value());
    EXPECT_FALSE(f.architecture().empty());
    walk(f);
  }
}

TEST(GgufRealFiles, ModelFilesParseWithTensorsInBounds) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(test::shared_data() + "/models", ec))
    for (const char* name : {"model-f32.gguf", "model-q8_0.gguf"})
      if (std::filesystem::exists(e.path() / name)) files.push_back((e.path() / name).string());
  if (files.empty()) BRISK_SKIP_MISSING_ASSET() << "no model GGUF files in " << test::shared_data() << "/models";
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    const auto f = gguf::File::open(path, MappedFile::Mode::read);
    ASSERT_FALSE(f.tensors().empty());
    const bool q8 = path.find("q8_0") != std::string::npos;
    bool saw_q8 = false;
    for (const auto& t : f.tensors()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;
      saw_q8 |= t.type == QuantType::Q8_0;
      if (t.type == QuantType::F32) {
        float x;
        std::memcpy(&x, t.data, 4);
        EXPECT_TRUE(std::isfinite(x)) << t.name;
      }
    }
    EXPECT_EQ(saw_q8, q8);
    const std::string arch = f.architecture();
    EXPECT_TRUE(f.get_int(arch + ".block_count").has_value()) << arch;
    walk(f);
  }
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

// Re-writing a file made by llama.cpp's converter must reproduce it byte for byte: the writer
// lays out metadata, tensor infos, padding and data exactly as llama.cpp does.
TEST(GgufRealFiles, RewriteIsByteIdenticalToLlamaCppOutput) {
  std::vector<std::string> files = test::shared_files("vocab", ".gguf");
  for (const char* m : {"models/llama/model-q8_0.gguf", "models/gemma3/model-f32.gguf"})
    if (std::filesystem::exists(test::shared_data() + "/" + m))
      files.push_back(test::shared_data() + "/" + m);
  if (files.empty()) BRISK_SKIP_MISSING_ASSET() << "no GGUF files under " << test::shared_data();
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    const auto f = gguf::File::open(path);
    if (f.version() != 3) continue;
    gguf::Writer w;
    if (f.alignment() != 32) w.set_alignment(f.alignment());
    for (const auto& [k, v] : f.metadata()) w.set(k, v);
    for (const auto& t : f.tensors()) w.add_tensor(t.name, t.type, t.ne, t.data, t.n_bytes);
    const std::string out = test::temp_path("rewrite.gguf");
    w.write(out);
    const auto a = test::read_all(path);
    const auto b = test::read_all(out);
    EXPECT_EQ(a.size(), b.size());
    size_t first_diff = 0;
    while (first_diff < std::min(a.size(), b.size()) && a[first_diff] == b[first_diff]) ++first_diff;
    EXPECT_EQ(first_diff, std::min(a.size(), b.size())) << "first difference at byte " << first_diff;
    std::filesystem::remove(out);
  }
}

}  // namespace
}  // namespace brisk

namespace brisk {
namespace {

TEST(GgufMappedFile, ModesAgreeAndErrorsNameThePath) {
  const std::string path = test::temp_path("bytes.bin");
  std::vector<uint8_t> bytes(10000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = uint8_t(i * 13);
  test::write_all(path, bytes);
  for (auto mode : {MappedFile::Mode::mmap, MappedFile::Mode::read}) {
    const auto m = MappedFile::open(path, mode);
    ASSERT_EQ(m->size(), bytes.size());
    EXPECT_EQ(std::memcmp(m->data(), bytes.data(), bytes.size()), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data()) % 64, 0u);
    EXPECT_EQ(m->path(), path);
  }
  const auto mem = MappedFile::from_memory(bytes.data(), 3, "mem");
  EXPECT_EQ(mem->size(), 3u);
  EXPECT_EQ(mem->data()[2], bytes[2]);
  EXPECT_EQ(MappedFile::from_memory(nullptr, 0)->size(), 0u);
  test::write_all(path, {});
  EXPECT_EQ(MappedFile::open(path)->size(), 0u);
  for (const std::string& bad : {path + ".missing", ::testing::TempDir()}) {
    try {
      MappedFile::open(bad);
      ADD_FAILURE() << "opened " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(gguf::File::open(path), Error);  // empty file
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace brisk
