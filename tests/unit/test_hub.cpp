// Hub client pieces that need no network: sha256, references, file selection, the Hub's JSON,
// the cache layout, locks, the GGUF header peek and offline resolution.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/flags.h"
#include "formats/gguf.h"
#include "hub/api.h"
#include "hub/cache.h"
#include "hub/cache_scan.h"
#include "hub/http.h"
#include "hub/reference.h"
#include "hub/resolve.h"
#include "hub/select.h"
#include "hub/sha256.h"

namespace fs = std::filesystem;
using namespace brisk;
using namespace brisk::hub;

namespace {

std::string sha_hex(const std::string& s) {
  Sha256 h;
  h.update(s.data(), s.size());
  return h.hex();
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/brisk-hub-unit-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

}  // namespace

TEST(HubSha256, KnownVectors) {
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // one million 'a', fed in uneven pieces
  Sha256 h;
  const std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left) {
    const size_t n = std::min(left, chunk.size());
    h.update(chunk.data(), n);
    left -= n;
  }
  EXPECT_EQ(h.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HubReference, Forms) {
  HubRef r = parse_hub_ref("Qwen/Qwen3-0.6B-GGUF:q8_0");
  EXPECT_EQ(r.repo_id, "Qwen/Qwen3-0.6B-GGUF");
  EXPECT_EQ(r.quant, "q8_0");
  EXPECT_EQ(r.revision, "main");
  EXPECT_FALSE(r.revision_given);
  r = parse_hub_ref("org/name/sub/model-Q4_K_M.gguf");
  EXPECT_EQ(r.repo_id, "org/name");
  EXPECT_EQ(r.file, "sub/model-Q4_K_M.gguf");
  r = parse_hub_ref("hf.co/org/name@refs/pr/3:Q4_K_M");
  EXPECT_EQ(r.repo_id, "org/name");
  EXPECT_EQ(r.revision, "refs/pr/3");
  EXPECT_EQ(r.quant, "Q4_K_M");
  EXPECT_EQ(r.to_string(), "org/name@refs/pr/3:Q4_K_M");
  r = parse_hub_ref("https://huggingface.co/org/name");
  EXPECT_EQ(r.repo_id, "org/name");
}

TEST(HubReference, RejectsUnsafe) {
  for (const char* bad : {"", "name", "org/", "/name", "org/na..me", "org/-x", "org/x y",
                          "org/name/../../etc/passwd", "org/name@../x", "org/name@", "org/name:",
                          "org/name/f.gguf:Q8_0", "org--x/name", "org/name:Q8/0"}) {
    EXPECT_THROW(parse_hub_ref(bad), Error) << bad;
  }
  EXPECT_FALSE(is_safe_repo_path("a//b"));
  EXPECT_FALSE(is_safe_repo_path("a/./b"));
  EXPECT_FALSE(is_safe_repo_path("a\\b"));
  EXPECT_TRUE(is_safe_repo_path("a/b.gguf"));
  EXPECT_TRUE(looks_like_local_path("./x.gguf"));
  EXPECT_FALSE(looks_like_local_path("org/name"));
}

TEST(HubSelect, GgufQuantsShardsAndDefaults) {
  const std::vector<std::string> files = {
      "README.md", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf", "m.q8_0.gguf",
      "BF16/m-BF16-00001-of-00002.gguf", "BF16/m-BF16-00002-of-00002.gguf",
      "mmproj-m-f16.gguf"};
  Selection s = select_files(parse_hub_ref("o/m:q8_0"), files, "o/m");
  EXPECT_EQ(s.files, std::vector<std::string>{"m.q8_0.gguf"});
  EXPECT_EQ(s.quant, "Q8_0");
  s = select_files(parse_hub_ref("o/m:bf16"), files, "o/m");
  EXPECT_EQ(s.files.size(), 2u);
  EXPECT_EQ(s.entry, "BF16/m-BF16-00001-of-00002.gguf");
  s = select_files(parse_hub_ref("o/m"), files, "o/m");
  EXPECT_EQ(s.entry, "m-Q4_K_M.gguf");
  s = select_files(parse_hub_ref("o/m/BF16/m-BF16-00002-of-00002.gguf"), files, "o/m");
  EXPECT_EQ(s.files.size(), 2u);
  try {
    select_files(parse_hub_ref("o/m:Q2_K"), files, "o/m");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("available: BF16, Q4_K_M, Q4_K_S, Q8_0"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("mmproj"), std::string::npos) << msg;
  }
  // "K_M" is not a quant of its own: matching needs a '-', '.' or '/' before it
  EXPECT_THROW(select_files(parse_hub_ref("o/m:K_M"), files, "o/m"), Error);
  // incomplete shard set
  EXPECT_THROW(select_files(parse_hub_ref("o/m:bf16"), {"m-BF16-00001-of-00002.gguf"}, "o/m"), Error);
  // no default quant among several: the error lists them
  EXPECT_THROW(select_files(parse_hub_ref("o/m"), {"a-Q3_K_S.gguf", "a-Q2_K.gguf"}, "o/m"), Error);
  // ambiguous quant
  EXPECT_THROW(select_files(parse_hub_ref("o/m:Q8_0"), {"a-Q8_0.gguf", "b-Q8_0.gguf"}, "o/m"), Error);
}

TEST(HubSelect, SafetensorsNeverBin) {
  const std::vector<std::string> files = {
      "config.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
      "model.safetensors.index.json", "consolidated.safetensors", "pytorch_model.bin",
      "tokenizer.json", "tokenizer.model", "special_tokens_map.json", "onnx/model.safetensors",
      "README.md"};
  const Selection s = select_files(parse_hub_ref("o/m"), files, "o/m");
  EXPECT_EQ(s.format, "safetensors");
  EXPECT_EQ(s.entry, "");
  EXPECT_EQ(s.files, (std::vector<std::string>{
                         "config.json", "model-00001-of-00002.safetensors",
                         "model-00002-of-00002.safetensors", "model.safetensors.index.json",
                         "special_tokens_map.json", "tokenizer.json", "tokenizer.model"}));
  EXPECT_THROW(select_files(parse_hub_ref("o/m"), {"config.json", "pytorch_model.bin"}, "o/m"), Error);
}

TEST(HubSelect, QuantLabels) {
  EXPECT_EQ(gguf_quant_label("Qwen3-0.6B-Q4_K_M.gguf"), "Q4_K_M");
  EXPECT_EQ(gguf_quant_label("llama-3.2-1b-instruct.iq4_xs.gguf"), "IQ4_XS");
  EXPECT_EQ(gguf_quant_label("x/model-UD-Q4_K_XL-00001-of-00003.gguf"), "Q4_K_XL");
  EXPECT_EQ(gguf_quant_label("model-f16.gguf"), "F16");
  EXPECT_EQ(gguf_quant_label("model.gguf"), "");
  auto shard = parse_shard_name("a/b-00002-of-00003.gguf");
  ASSERT_TRUE(shard.has_value());
  EXPECT_EQ(shard->set, "a/b.gguf");
  EXPECT_EQ(shard->index, 2);
  EXPECT_FALSE(parse_shard_name("b-00004-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_shard_name("-00001-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_shard_name("b-0001-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_shard_name("b-00001-of-00003").has_value());
  EXPECT_EQ(parse_shard_name("model-00001-of-00002.safetensors")->set, "model.safetensors");
  EXPECT_EQ(gguf_quant_label("m-TQ1_0.gguf"), "TQ1_0");
  EXPECT_EQ(gguf_quant_label("m-Q4_K_.gguf"), "");
  EXPECT_EQ(gguf_quant_label("gpt-oss-20b-MXFP4.gguf"), "MXFP4");
}

TEST(HubApi, ParsesAndValidatesRepoInfo) {
  const std::string sha(40, 'a');
  const std::string lfs(64, 'b');
  RepoInfo info = parse_repo_info(
      R"({"sha":")" + sha + R"(","siblings":[{"rfilename":"a.gguf","size":10,"blobId":")" +
          std::string(40, 'c') + R"(","lfs":{"sha256":")" + lfs + R"(","size":12}},{"rfilename":"README.md"}]})",
      "o/m", "o/m@main");
  ASSERT_EQ(info.files.size(), 2u);
  EXPECT_EQ(info.commit, sha);
  EXPECT_EQ(info.files[0].etag(), lfs);
  EXPECT_EQ(*info.files[0].size, 12u);
  EXPECT_EQ(info.files[1].etag(), "");
  EXPECT_THROW(parse_repo_info(R"({"sha":")" + sha + R"(","siblings":[{"rfilename":"../x"}]})", "o/m", "w"), Error);
  EXPECT_THROW(parse_repo_info(R"({"sha":"../../x","siblings":[]})", "o/m", "w"), Error);
  EXPECT_THROW(parse_repo_info("not json", "o/m", "w"), Error);
  EXPECT_THROW(parse_repo_info(R"({"sha":")" + sha + R"(","siblings":[{"rfilename":"a","lfs":{"sha256":"zz"}}]})", "o/m", "w"), Error);
  EXPECT_EQ(normalize_etag("W/\"" + lfs + "\""), lfs);
  EXPECT_EQ(normalize_etag("\"../../etc\""), "");
}

TEST(HubHttp, OriginsAndEscaping) {
  EXPECT_EQ(url_origin("https://HuggingFace.co/api/x"), "https://huggingface.co:443");
  EXPECT_EQ(url_origin("http://127.0.0.1:8080/x?y"), "http://127.0.0.1:8080");
  EXPECT_NE(url_origin("http://localhost:8080/x"), url_origin("http://127.0.0.1:8080/x"));
  EXPECT_EQ(url_escape("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(url_escape("a b/c.gguf", true), "a%20b/c.gguf");
}

TEST(HubCache, LayoutMatchesHuggingfaceHub) {
  TempDir tmp;
  EXPECT_EQ(repo_folder_name("org/name"), "models--org--name");
  EXPECT_EQ(repo_id_from_folder("models--org--na-me").value(), "org/na-me");
  EXPECT_FALSE(repo_id_from_folder("datasets--a--b").has_value());
  RepoCache cache(tmp.path.string(), "org/name");
  const std::string commit(40, '1');
  write(cache.blob_path("abc"), "data");
  cache.link_snapshot(commit, "sub/dir/file.gguf", "abc");
  cache.link_snapshot(commit, "sub/dir/file.gguf", "abc");  // idempotent
  const fs::path link = cache.snapshot_path(commit, "sub/dir/file.gguf");
  EXPECT_EQ(fs::read_symlink(link).string(), "../../../../blobs/abc");
  std::ifstream in(link);
  std::string got;
  in >> got;
  EXPECT_EQ(got, "data");
  cache.write_ref("main", commit);
  EXPECT_EQ(cache.resolve_revision("main").value(), commit);
  EXPECT_EQ(cache.resolve_revision(commit).value(), commit);
  EXPECT_FALSE(cache.resolve_revision("other").has_value());
  EXPECT_EQ(cache.snapshot_files(commit), std::vector<std::string>{"sub/dir/file.gguf"});
  fs::remove(cache.blob_path("abc"));
  EXPECT_TRUE(cache.snapshot_files(commit).empty());  // dangling links do not count
}

TEST(HubCache, LockIsExclusive) {
  TempDir tmp;
  const std::string path = (tmp.path / "x.lock").string();
  std::atomic<bool> second_has_it{false};
  std::thread other;
  {
    FileLock first(path, "");
    other = std::thread([&] {
      FileLock second(path, "");
      second_has_it = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(second_has_it.load());
  }
  other.join();
  EXPECT_TRUE(second_has_it.load());
}

TEST(HubList, ArchitectureFromGgufAndConfig) {
  TempDir tmp;
  const std::string dir = (tmp.path / "hub").string();
  RepoCache gguf_repo(dir, "org/tiny-GGUF");
  const std::string commit(40, '4');
  gguf::Writer w;
  w.set("general.architecture", gguf::Value::from_string("qwen3"));
  fs::create_directories(gguf_repo.root() + "/blobs");
  w.write(gguf_repo.blob_path("g1"));
  gguf_repo.link_snapshot(commit, "tiny-Q8_0.gguf", "g1");
  write(gguf_repo.blob_path("g2"), "GGUF garbage");  // unreadable: no architecture, no crash
  gguf_repo.link_snapshot(commit, "tiny-F16.gguf", "g2");
  RepoCache st_repo(dir, "org/tiny");
  write(st_repo.blob_path("c1"), R"({"model_type": "gemma3"})");
  st_repo.link_snapshot(commit, "config.json", "c1");
  write(st_repo.blob_path("w1"), "weights");
  st_repo.link_snapshot(commit, "model.safetensors", "w1");
  write(st_repo.incomplete_path("w2"), "part");
  const auto models = scan_cache(dir);
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0].repo_id, "org/tiny");
  EXPECT_EQ(models[0].format, "safetensors");
  EXPECT_EQ(models[0].architecture, "gemma3");
  EXPECT_EQ(models[0].size_bytes, 31u);
  EXPECT_EQ(models[0].n_incomplete, 1u);
  EXPECT_EQ(models[1].format, "gguf");
  EXPECT_EQ(models[1].quants, (std::vector<std::string>{"F16", "Q8_0"}));
  EXPECT_EQ(models[1].architecture, "qwen3");
}

TEST(HubResolve, OfflineFromCacheAndLocalPaths) {
  TempDir tmp;
  HubOptions opt;
  opt.cache_dir = (tmp.path / "hub").string();
  opt.offline = true;
  opt.endpoint = "http://127.0.0.1:9";  // never contacted
  const std::string existing = (tmp.path / "local.gguf").string();
  write(existing, "x");
  EXPECT_EQ(hub_resolve_model(existing, opt), existing);
  EXPECT_THROW(hub_resolve_model("./does/not/exist.gguf", opt), Error);
  try {
    hub_resolve_model("org/name:Q8_0", opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not in the cache"), std::string::npos) << e.what();
  }
  RepoCache cache(opt.cache_dir, "org/name");
  const std::string commit(40, '2');
  write(cache.blob_path("b1"), "gguf");
  cache.link_snapshot(commit, "name-Q8_0.gguf", "b1");
  cache.write_ref("main", commit);
  EXPECT_EQ(hub_resolve_model("org/name:q8_0", opt), cache.snapshot_path(commit, "name-Q8_0.gguf"));
  EXPECT_EQ(hub_resolve_model("org/name", opt), cache.snapshot_path(commit, "name-Q8_0.gguf"));
  EXPECT_THROW(hub_resolve_model("org/name:Q4_K_M", opt), Error);
  const auto models = scan_cache(opt.cache_dir);
  ASSERT_EQ(models.size(), 1u);
  EXPECT_EQ(models[0].quants, std::vector<std::string>{"Q8_0"});
  EXPECT_GT(models[0].last_used, 0);
  const RemoveResult rm = remove_from_cache(opt.cache_dir, "org/name:Q8_0");
  // The last file went, so the repo goes too (its ref file is freed with the blob).
  EXPECT_EQ(rm.bytes_freed, 4u + commit.size());
  EXPECT_FALSE(fs::exists(cache.blob_path("b1")));
  EXPECT_FALSE(fs::exists(cache.root()));
  EXPECT_TRUE(scan_cache(opt.cache_dir).empty());
}

TEST(HubResolve, ConnectionRefusedIsANetworkError) {
  TempDir tmp;
  HubOptions opt;
  opt.cache_dir = (tmp.path / "hub").string();
  opt.endpoint = "http://127.0.0.1:9";  // discard port: nothing listens on loopback
  opt.progress = HubProgress::quiet;
  try {
    hub_resolve_model("org/name", opt);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach the Hub"), std::string::npos) << e.what();
  }
  // once cached, an unreachable Hub falls back to the cached snapshot (pull does not)
  RepoCache cache(opt.cache_dir, "org/name");
  const std::string commit(40, '3');
  write(cache.blob_path("b2"), "{}");
  cache.link_snapshot(commit, "config.json", "b2");
  write(cache.blob_path("b3"), "weights");
  cache.link_snapshot(commit, "model.safetensors", "b3");
  cache.write_ref("main", commit);
  EXPECT_EQ(hub_resolve_model("org/name", opt), cache.snapshot_dir(commit));
  EXPECT_THROW(hub_pull("org/name", opt, /*allow_cache_fallback=*/false), NetworkError);
}
