// `brisk ps`: the models a running `brisk serve` has loaded, read through its API (GET
// /v1/models on --host/--port, or on the Unix socket of --unix), printed as a table. Fields
// of the entries beyond OpenAI's (id, object, created, owned_by) become columns as they are.
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/command.h"
#include "core/error.h"

namespace {

using json = nlohmann::json;

std::string cell(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

std::string local_time(const json& v) {
  if (!v.is_number_integer()) return cell(v);
  const std::time_t t = std::time_t(v.get<int64_t>());
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

int cmd_ps(const std::vector<std::string>& args) {
  std::string host = "127.0.0.1", unix_path, api_key;
  int32_t port = 8080, timeout = 10;
  bool as_json = false;
  if (const char* k = std::getenv("BRISK_API_KEY")) api_key = k;
  brisk::cli::ArgParser p("ps", "[options]", "Lists the models a running `brisk serve` has loaded (GET /v1/models).");
  p.text({"--host"}, &host, "ADDR", "the server's address (default 127.0.0.1)");
  p.integer({"--port"}, &port, 1, 65535, "N", "the server's port (default 8080)");
  p.text({"--unix"}, &unix_path, "PATH", "the server's Unix socket instead of TCP");
  p.text({"--api-key"}, &api_key, "KEY", "the server's key (default $BRISK_API_KEY)");
  p.integer({"--timeout"}, &timeout, 1, 3600, "S", "seconds to wait for the answer (default 10)");
  p.flag({"--json"}, &as_json, "print the server's answer as it came");
  if (!p.parse(args)) return 0;

  const std::string where = unix_path.empty() ? brisk::str_cat("http://", host, ":", port) : "unix:" + unix_path;
  httplib::Client client = unix_path.empty() ? httplib::Client(host, port) : httplib::Client(unix_path);
  if (!unix_path.empty()) client.set_address_family(AF_UNIX);
  client.set_connection_timeout(timeout, 0);
  client.set_read_timeout(timeout, 0);
  httplib::Headers headers;
  if (!api_key.empty()) headers.emplace("Authorization", "Bearer " + api_key);
  const httplib::Result r = client.Get("/v1/models", headers);
  if (!r)
    brisk::fail("no server answers at ", where, " (", httplib::to_string(r.error()),
                "); start one with `brisk serve MODEL`");
  if (r->status == 401)
    brisk::fail(where, " wants an API key: give --api-key KEY or set BRISK_API_KEY");
  BRISK_CHECK(r->status == 200, where, "/v1/models answered HTTP ", r->status, ": ", r->body.substr(0, 200));
  const json doc = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  BRISK_CHECK(doc.is_object() && doc.contains("data") && doc["data"].is_array(), where,
              "/v1/models: the answer is not a model list");
  if (as_json) {
    std::printf("%s\n", doc.dump(2).c_str());
    return 0;
  }
  if (doc["data"].empty()) {
    std::printf("no models loaded at %s\n", where.c_str());
    return 0;
  }
  // Columns: the model, then every other field in first-seen order ("object" says nothing).
  std::vector<std::string> keys;
  for (const json& m : doc["data"]) {
    if (!m.is_object()) continue;
    for (const auto& [k, v] : m.items())
      if (k != "id" && k != "object" && std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  std::vector<std::vector<std::string>> rows{{"MODEL"}};
  for (const std::string& k : keys) {
    std::string h = k;
    for (char& c : h) c = c == '_' ? ' ' : char(std::toupper(static_cast<unsigned char>(c)));
    rows[0].push_back(h);
  }
  for (const json& m : doc["data"]) {
    if (!m.is_object()) continue;
    std::vector<std::string> row{cell(m.value("id", json()))};
    for (const std::string& k : keys) {
      const json v = m.contains(k) ? m[k] : json();
      row.push_back(k == "created" ? local_time(v) : cell(v));
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i)
      line += i + 1 == row.size() ? row[i] : row[i] + std::string(width[i] - row[i].size() + 2, ' ');
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace

BRISK_COMMAND("ps", "list the models a running server has loaded (through its API)", cmd_ps);
