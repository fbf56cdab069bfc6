// GGUF reader on hostile input: truncation at every header byte, seeded random byte flips,
// absurd counts, lengths, offsets and types. Each must end in brisk::Error (never a crash, never
// another exception type, never a huge allocation) with a message naming the offset.
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "required_assets.h"

#include "core/error.h"
#include "formats/gguf.h"
#include "test_gguf_util.h"

namespace brisk {
namespace {

using gguf::ValueType;

// Little-endian byte builder for hand-made GGUF files.
struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& pad(size_t alignment) {
    while (b.size() % alignment) b.push_back(0);
    return *this;
  }
};

gguf::File parse(const std::vector<uint8_t>& b) {
  return gguf::File::parse(MappedFile::from_memory(b.data(), b.size(), "t.gguf"));
}

// Parses; returns "" on success, the message on brisk::Error; fails the test on anything else.
std::string try_parse(const std::vector<uint8_t>& b) {
  try {
    const auto f = parse(b);
    // Touch everything a consumer would.
    for (const auto& t : f.tensors()) {
      if (t.n_bytes) {
        EXPECT_GE(t.data[0] + t.data[t.n_bytes - 1], 0);
      }
    }
    return "";
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "non-brisk exception: " << e.what();
    return e.what();
  }
}

// A small valid file: 2 keys (one a string array), 2 tensors (F32 [4], Q8_0 [32, 2]).
Bytes small_file() {
  Bytes x;
  x.b = {'G', 'G', 'U', 'F'};
  x.put<uint32_t>(3).put<uint64_t>(2).put<uint64_t>(2);
  x.str("general.architecture").put<uint32_t>(8).str("llama");
  x.str("tokenizer.ggml.tokens").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(3);
  x.str("a").str("bb").str("ccc");
  x.str("w.f32").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(0);
  x.str("w.q8").put<uint32_t>(2).put<uint64_t>(32).put<uint64_t>(2).put<uint32_t>(8)
      .put<uint64_t>(32);
  x.pad(32);
  for (int i = 0; i < 32 + 68; ++i) x.b.push_back(uint8_t(i));
  return x;
}

TEST(GgufCorrupt, SmallFileIsValid) {
  const auto b = small_file().b;
  const auto f = parse(b);
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensors()[1].n_bytes, 68u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 3u);
  // Version 2 has the same layout (64-bit counts) and must read the same.
  auto v2 = b;
  v2[4] = 2;
  const auto f2 = parse(v2);
  EXPECT_EQ(f2.version(), 2u);
  EXPECT_EQ(f2.tensors().size(), 2u);
  EXPECT_EQ(f2.tensors()[1].data, f2.bytes()->data() + f2.data_offset() + 32);
}

TEST(GgufCorrupt, EveryTruncationOfSmallFileFails) {
  const auto full = small_file().b;
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> b(full.begin(), full.begin() + n);
    const std::string msg = try_parse(b);
    EXPECT_NE(msg, "") << "truncated to " << n << " bytes parsed";
    EXPECT_NE(msg.find("t.gguf"), std::string::npos) << msg;
  }
}

// Real files: every truncation point inside the header region (sampled densely for big
// headers), and sampled points in the data section when the file has tensors.
TEST(GgufCorrupt, TruncatedRealFilesFail) {
  auto files = test::shared_files("vocab", ".gguf");
  for (const char* m : {"models/llama/model-q8_0.gguf", "models/qwen3/model-f32.gguf"})
    if (std::filesystem::exists(test::shared_data() + "/" + m))
      files.push_back(test::shared_data() + "/" + m);
  if (files.empty()) BRISK_SKIP_MISSING_ASSET() << "no GGUF files under " << test::shared_data();
  std::mt19937_64 rng(1234);
  for (const auto& path : files) {
    SCOPED_TRACE(path);
    const auto full = test::read_all(path);
    const auto f = parse(full);
    // The last byte that matters: end of the header, or end of the last tensor's data.
    uint64_t needed = f.tensors().empty() ? 0 : f.data_offset();
    for (const auto& t : f.tensors()) needed = std::max(needed, f.data_offset() + t.offset + t.n_bytes);
    // Header end: data_offset minus padding is not exposed; for tensor-less files every byte
    // before the (unpadded) end of metadata matters, which is at least size - alignment.
    const uint64_t header_bytes =
        f.tensors().empty() ? full.size() - std::min<uint64_t>(full.size(), f.alignment())
                            : f.data_offset() - f.alignment();
    if (!f.tensors().empty()) {
      ASSERT_LE(needed, full.size());
    }
    std::vector<uint64_t> cuts;
    // Every byte of the first 4 KiB and the last 4 bytes of the header, 4 samples between
    // (a cut deep in a vocabulary costs a near-full parse, so those are sampled).
    for (uint64_t n = 0; n < std::min<uint64_t>(header_bytes, 4096); ++n) cuts.push_back(n);
    for (uint64_t n = header_bytes > 4 ? header_bytes - 4 : 0; n < header_bytes; ++n)
      cuts.push_back(n);
    for (int i = 0; i < 4 && header_bytes > 0; ++i) cuts.push_back(rng() % header_bytes);
    if (!f.tensors().empty())
      for (int i = 0; i < 20; ++i) cuts.push_back(f.data_offset() + rng() % (needed - f.data_offset()));
    for (uint64_t n : cuts) {
      const auto m = MappedFile::from_memory(full.data(), n, "cut.gguf");
      bool threw = false;
      try {
        gguf::File::parse(m);
      } catch (const Error& e) {
        threw = true;
        EXPECT_NE(std::string(e.what()).find("cut.gguf: offset "), std::string::npos) << e.what();
      }
      EXPECT_TRUE(threw) << "truncated at " << n << " of " << full.size() << " parsed";
    }
  }
}

TEST(GgufCorrupt, SeededRandomByteFlipsNeverCrash) {
  std::vector<std::vector<uint8_t>> inputs = {small_file().b};
  const auto vocab = test::shared_files("vocab", ".gguf");
  if (!vocab.empty()) {
    auto b = test::read_all(vocab.front());
    b.resize(std::min<size_t>(b.size(), 200000));  // truncated copy: fails anyway; flips early
    inputs.push_back(std::move(b));
  }
  std::mt19937_64 rng(42);
  int failures = 0, total = 0;
  for (const auto& base : inputs) {
    for (int round = 0; round < 400; ++round) {
      auto b = base;
      const int n_flips = 1 + int(rng() % 4);
      // Bias flips into the first 256 bytes, where counts, lengths and types live.
      for (int k = 0; k < n_flips; ++k) {
        const size_t span = (rng() % 2) ? std::min<size_t>(256, b.size()) : b.size();
        b[rng() % span] ^= uint8_t(1u << (rng() % 8));
      }
      failures += try_parse(b).empty() ? 0 : 1;
      ++total;
    }
  }
  EXPECT_GT(failures, total / 10);  // flips in counts and lengths must be caught
}

struct Mutation {
  const char* what;
  std::function<void(Bytes&)> build;
  const char* expect;  // substring of the error
};

TEST(GgufCorrupt, AbsurdFieldsAreRejectedWithOffsets) {
  const auto head = [](Bytes& x, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    x.b = {'G', 'G', 'U', 'F'};
    x.put<uint32_t>(version).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  };
  const uint64_t huge = std::numeric_limits<uint64_t>::max();
  const std::vector<Mutation> cases = {
      {"bad magic", [&](Bytes& x) { head(x, 3, 0, 0); x.b[0] = 'X'; }, "offset 0: not a GGUF"},
      {"version 1", [&](Bytes& x) { head(x, 1, 0, 0); }, "offset 4: GGUF version 1"},
      {"version 7", [&](Bytes& x) { head(x, 7, 0, 0); }, "unsupported GGUF version 7"},
      {"big endian", [&](Bytes& x) { head(x, 3u << 24, 0, 0); }, "big-endian"},
      {"huge kv count", [&](Bytes& x) { head(x, 3, 0, huge); }, "offset 16: metadata count"},
      {"huge tensor count", [&](Bytes& x) { head(x, 3, 1ull << 40, 0); }, "offset 8: tensor count"},
      {"huge key length",
       [&](Bytes& x) { head(x, 3, 0, 1); x.put<uint64_t>(1ull << 50).put<uint64_t>(0).put<uint64_t>(0); }, "offset 24: metadata key length"},
      {"bad value type",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("k").put<uint32_t>(13).put<uint32_t>(0); },
       "offset 33: metadata key 'k' has invalid value type 13"},
      {"huge string",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("k").put<uint32_t>(8).put<uint64_t>(huge); },
       "offset 37: string length"},
      {"huge array",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("k").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(1ull << 62); },
       "offset 41: array count"},
      {"huge string array",
       [&](Bytes& x) {
         head(x, 3, 0, 1);
         x.str("k").put<uint32_t>(9).put<uint32_t>(8).put<uint64_t>(1000);
         for (int i = 0; i < 1000; ++i) x.put<uint8_t>(0);  // 1000 bytes < 1000 × 8
       },
       "array count 1000 cannot fit"},
      {"bad array type",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("k").put<uint32_t>(9).put<uint32_t>(77).put<uint64_t>(0); },
       "invalid array element type 77"},
      {"too many values",
       [&](Bytes& x) {
         head(x, 3, 0, 1);
         x.str("k").put<uint32_t>(9).put<uint32_t>(0).put<uint64_t>(9000000);
         x.b.resize(x.b.size() + 9000000);
       },
       "offset 41: more than 8388608 metadata values"},
      {"deep nesting",
       [&](Bytes& x) {
         head(x, 3, 0, 1);
         x.str("k").put<uint32_t>(9);
         for (int i = 0; i < 100; ++i) x.put<uint32_t>(9).put<uint64_t>(1);
       },
       "nested deeper"},
      {"bool 2", [&](Bytes& x) { head(x, 3, 0, 1); x.str("k").put<uint32_t>(7).put<uint8_t>(2); },
       "bool value 2"},
      {"duplicate key",
       [&](Bytes& x) {
         head(x, 3, 0, 2);
         x.str("k").put<uint32_t>(0).put<uint8_t>(1);
         x.str("k").put<uint32_t>(0).put<uint8_t>(1);
       },
       "offset 38: duplicate metadata key 'k'"},
      {"alignment 3",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("general.alignment").put<uint32_t>(4).put<uint32_t>(3); },
       "offset 53: general.alignment must be a power-of-two"},
      {"alignment 0",
       [&](Bytes& x) { head(x, 3, 0, 1); x.str("general.alignment").put<uint32_t>(4).put<uint32_t>(0); },
       "general.alignment"},
      {"five dims",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(5); for (int i = 0; i < 6; ++i) x.put<uint64_t>(1); },
       "offset 33: tensor 't' has 5 dimensions"},
      {"zero dims",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(0).put<uint32_t>(0).put<uint64_t>(0).put<uint64_t>(0); },
       "has 0 dimensions"},
      {"element overflow",
       [&](Bytes& x) {
         head(x, 3, 1, 0);
         x.str("t").put<uint32_t>(2).put<uint64_t>(1ull << 40).put<uint64_t>(1ull << 40);
         x.put<uint32_t>(0).put<uint64_t>(0);
       },
       "element count overflows"},
      {"negative dim",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(1).put<uint64_t>(huge).put<uint32_t>(0).put<uint64_t>(0); },
       "element count overflows"},
      {"byte overflow",
       [&](Bytes& x) {
         head(x, 3, 1, 0);
         x.str("t").put<uint32_t>(2).put<uint64_t>(1ull << 62).put<uint64_t>(1).put<uint32_t>(0).put<uint64_t>(0);
       },
       "byte size overflows"},
      {"unknown type",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(4).put<uint64_t>(0); },
       "unknown type id 4"},
      {"partial block",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(1).put<uint64_t>(33).put<uint32_t>(8).put<uint64_t>(0); },
       "not a multiple of the Q8_0 block size 32"},
      {"misaligned offset",
       [&](Bytes& x) { head(x, 3, 1, 0); x.str("t").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(4); },
       "offset 4 is not a multiple of the alignment 32"},
      {"offset beyond file",
       [&](Bytes& x) {
         head(x, 3, 1, 0);
         x.str("t").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(huge - 31);
         x.pad(32);
         x.b.resize(x.b.size() + 64);
       },
       "lies outside the 64-byte data section"},
      {"data past end",
       [&](Bytes& x) {
         head(x, 3, 1, 0);
         x.str("t").put<uint32_t>(1).put<uint64_t>(1000).put<uint32_t>(0).put<uint64_t>(0);
         x.pad(32);
         x.b.resize(x.b.size() + 64);
       },
       "tensor 't' data [0, +4000)"},
      {"duplicate tensor",
       [&](Bytes& x) {
         head(x, 3, 2, 0);
         x.str("t").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(0);
         x.str("t").put<uint32_t>(1).put<uint64_t>(4).put<uint32_t>(0).put<uint64_t>(32);
         x.pad(32);
         x.b.resize(x.b.size() + 64);
       },
       "offset 57: duplicate tensor name 't'"},
  };
  for (const auto& c : cases) {
    Bytes x;
    c.build(x);
    const std::string msg = try_parse(x.b);
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": got '" << msg << "'";
    EXPECT_EQ(msg.rfind("t.gguf: ", 0), 0u) << c.what << ": " << msg;
  }
}

}  // namespace
}  // namespace brisk
