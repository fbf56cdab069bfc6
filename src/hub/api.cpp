#include "hub/api.h"

#include <nlohmann/json.hpp>

#include "hub/reference.h"

namespace brisk::hub {
namespace {

bool is_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

std::string short_body(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

}  // namespace

std::string normalize_etag(const std::string& etag) {
  std::string s = etag;
  if (s.rfind("W/", 0) == 0) s = s.substr(2);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  if ((s.size() == 40 || s.size() == 64) && is_hex(s)) return s;
  return "";
}

std::string resolve_url(const std::string& endpoint, const std::string& repo_id,
                        const std::string& revision, const std::string& path) {
  return endpoint + "/" + repo_id + "/resolve/" + url_escape(revision, false) + "/" +
         url_escape(path, true);
}

RepoInfo parse_repo_info(const std::string& json_text, const std::string& repo_id,
                         const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    fail("the Hub's answer for ", where, " is not JSON: ", e.what());
  }
  BRISK_CHECK(j.is_object(), "the Hub's answer for ", where, " is not a JSON object");
  RepoInfo info;
  info.repo_id = repo_id;
  const auto sha = j.find("sha");
  BRISK_CHECK(sha != j.end() && sha->is_string() && is_commit_hash(sha->get<std::string>()),
              "the Hub's answer for ", where, " has no commit hash ('sha')");
  info.commit = sha->get<std::string>();
  const auto siblings = j.find("siblings");
  BRISK_CHECK(siblings != j.end() && siblings->is_array(), "the Hub's answer for ", where,
              " has no file list ('siblings')");
  for (const auto& s : *siblings) {
    BRISK_CHECK(s.is_object() && s.contains("rfilename") && s["rfilename"].is_string(),
                "the Hub's answer for ", where, " has a file entry without 'rfilename'");
    RepoFile f;
    f.path = s["rfilename"].get<std::string>();
    BRISK_CHECK(is_safe_repo_path(f.path), "the Hub's answer for ", where,
                " lists an unsafe file path '", short_body(f.path), "'");
    if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
    if (s.contains("blobId") && s["blobId"].is_string()) {
      const std::string b = s["blobId"].get<std::string>();
      if (b.size() == 40 && is_hex(b)) f.blob_id = b;
    }
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const auto& lfs = s["lfs"];
      if (lfs.contains("sha256") && lfs["sha256"].is_string()) {
        const std::string h = lfs["sha256"].get<std::string>();
        BRISK_CHECK(h.size() == 64 && is_hex(h), "the Hub's answer for ", where, " gives file ",
                    f.path, " a malformed sha256");
        f.lfs_sha256 = h;
      }
      if (lfs.contains("size") && lfs["size"].is_number_unsigned())
        f.size = lfs["size"].get<uint64_t>();
    }
    info.files.push_back(std::move(f));
  }
  return info;
}

RepoInfo fetch_repo_info(const HttpClient& http, const std::string& repo_id,
                         const std::string& revision) {
  const std::string url = http.endpoint() + "/api/models/" + repo_id + "/revision/" +
                          url_escape(revision, false) + "?blobs=true";
  const HttpResponse resp = http.request({.url = url, .max_body_bytes = 32u << 20});
  if (resp.transport_error != 0 || resp.status != 200)
    throw_hub_error(http, resp, repo_id, revision, "the file list");
  return parse_repo_info(resp.body, repo_id, repo_id + "@" + revision);
}

void throw_hub_error(const HttpClient& http, const HttpResponse& resp, const std::string& repo_id,
                     const std::string& revision, const std::string& what) {
  if (resp.transport_error != 0) {
    const bool transient = transport_error_is_transient(resp.transport_error);
    throw NetworkError(
        str_cat("cannot reach the Hub at ", http.endpoint(), " (", resp.transport_message,
                ") while fetching ", what, " of ", repo_id,
                ": check the network connection, or set HF_HUB_OFFLINE=1 to use only models "
                "already in the cache"),
        transient);
  }
  const std::string code = resp.header("x-error-code");
  const std::string server_msg = resp.header("x-error-message");
  const std::string page = http.endpoint() + "/" + repo_id;
  const std::string detail = server_msg.empty() ? "" : str_cat(" (the Hub says: ", short_body(server_msg), ")");
  if (code == "GatedRepo" || (resp.status == 403 && code != "RepoNotFound")) {
    if (!http.has_token())
      fail("model ", repo_id, " is gated: accept its license at ", page,
           " and give an access token with HF_TOKEN=... or --token", detail);
    fail("model ", repo_id, " is gated and the token given has no access to it: accept its "
         "license at ", page, " with the account of the token", detail);
  }
  if (code == "RepoNotFound" || (resp.status == 404 && code.empty() && what == "the file list"))
    fail("model repository ", repo_id, " not found on ", http.endpoint(),
         ": check the name (org/name)",
         http.has_token() ? "" : "; a private repository needs a token (HF_TOKEN or --token)",
         detail);
  if (code == "RevisionNotFound")
    fail("revision '", revision, "' not found in ", repo_id, detail);
  if (code == "EntryNotFound" || resp.status == 404)
    fail(what, " not found in ", repo_id, "@", revision, detail);
  if (resp.status == 401)
    fail(http.has_token() ? "the Hub rejected the token for " : "the Hub asks for a token for ",
         repo_id, ": set HF_TOKEN or pass --token", detail);
  if (resp.status == 429)
    fail("the Hub is rate-limiting requests (HTTP 429) for ", repo_id, ": try again later",
         detail);
  fail("the Hub answered HTTP ", resp.status, " for ", what, " of ", repo_id, "@", revision,
       detail, resp.body.empty() ? "" : ": ", short_body(resp.body));
}

}  // namespace brisk::hub
