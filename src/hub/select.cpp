#include "hub/select.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "core/error.h"

namespace brisk::hub {
namespace {

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool select_ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string select_basename(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_gguf(const std::string& path) { return select_ends_with(upper(path), ".GGUF"); }
bool is_top_level(const std::string& path) { return path.find('/') == std::string::npos; }
bool is_projector(const std::string& path) { return upper(select_basename(path)).rfind("MMPROJ", 0) == 0; }

// A GGUF model file, or the set of shards it belongs to.
struct GgufSet {
  std::string key;                  // path without shard suffix and .gguf
  std::string label;                // quant label, "" when none
  std::vector<std::string> files;   // sorted
  int count = 1;                    // shards announced by the names
};

std::string stem_of(const std::string& path) {
  std::string p = path;
  if (auto shard = parse_shard_name(p)) p = shard->set;
  if (is_gguf(p)) p = p.substr(0, p.size() - 5);
  return p;
}

std::vector<GgufSet> gguf_sets(const std::vector<std::string>& paths) {
  std::map<std::string, GgufSet> sets;
  for (const auto& p : paths) {
    if (!is_gguf(p) || is_projector(p)) continue;
    const std::string key = stem_of(p);
    GgufSet& s = sets[key];
    s.key = key;
    s.label = gguf_quant_label(p);
    s.files.push_back(p);
    if (auto shard = parse_shard_name(p)) s.count = shard->count;
  }
  std::vector<GgufSet> out;
  for (auto& [k, s] : sets) {
    std::sort(s.files.begin(), s.files.end());
    out.push_back(std::move(s));
  }
  return out;
}

bool set_matches_quant(const GgufSet& s, const std::string& quant_upper) {
  const std::string stem = upper(s.key);
  if (!select_ends_with(stem, quant_upper)) return false;
  if (stem.size() == quant_upper.size()) return true;
  const char before = stem[stem.size() - quant_upper.size() - 1];
  return before == '-' || before == '.' || before == '/';
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::string describe_choices(const std::vector<GgufSet>& sets) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  for (const auto& s : sets) {
    std::string n = s.label.empty() ? s.files.front() : s.label;
    if (seen.insert(n).second) names.push_back(n);
  }
  return names.empty() ? "(none)" : join(names);
}

void check_complete(const GgufSet& s, const std::string& where) {
  if (s.count <= 1 && s.files.size() == 1) return;
  std::set<int> have;
  for (const auto& f : s.files) {
    auto shard = parse_shard_name(f);
    BRISK_CHECK(shard && shard->count == s.count, "GGUF set ", s.key, " in ", where,
                " mixes shard counts");
    have.insert(shard->index);
  }
  BRISK_CHECK(int(have.size()) == s.count && *have.begin() == 1 && *have.rbegin() == s.count,
              "GGUF set ", s.key, " in ", where, " is incomplete: ", have.size(), " of ", s.count,
              " shards present");
}

Selection pick_gguf(const GgufSet& s, const std::string& where) {
  check_complete(s, where);
  Selection sel;
  sel.format = "gguf";
  sel.quant = s.label;
  sel.files = s.files;
  sel.entry = s.files.front();
  return sel;
}

Selection select_gguf_by_quant(const std::vector<GgufSet>& sets, const std::string& quant,
                               const std::string& where) {
  const std::string q = upper(quant);
  std::vector<const GgufSet*> hits;
  for (const auto& s : sets)
    if (set_matches_quant(s, q)) hits.push_back(&s);
  if (hits.empty()) {
    if (sets.empty()) fail("no GGUF files in ", where, ", so no quant ", quant, " either");
    fail("no GGUF file of quant ", quant, " in ", where, "; available: ", describe_choices(sets));
  }
  if (hits.size() > 1) {
    std::vector<std::string> names;
    for (const auto* s : hits) names.push_back(s->files.front());
    fail("quant ", quant, " in ", where, " matches several GGUF files: ", join(names),
         "; name one with org/name/FILE");
  }
  return pick_gguf(*hits.front(), where);
}

Selection select_default_gguf(const std::vector<GgufSet>& sets, const std::string& where) {
  if (sets.size() == 1) return pick_gguf(sets.front(), where);
  for (const char* q : kDefaultQuants) {
    std::vector<const GgufSet*> hits;
    for (const auto& s : sets)
      if (set_matches_quant(s, q)) hits.push_back(&s);
    if (hits.size() == 1) return pick_gguf(*hits.front(), where);
    if (hits.size() > 1) {
      std::vector<std::string> names;
      for (const auto* s : hits) names.push_back(s->files.front());
      fail(where, " has several GGUF files of the default quant ", q, ": ", join(names),
           "; name one with org/name/FILE");
    }
  }
  fail(where, " has several GGUF files and none of the default quants; choose one with "
       "org/name:QUANT from: ", describe_choices(sets));
}

Selection select_safetensors(const std::vector<std::string>& paths) {
  Selection sel;
  sel.format = "safetensors";
  std::set<std::string> all(paths.begin(), paths.end());
  std::vector<std::string> weights;
  std::string index;
  if (all.count("model.safetensors.index.json")) {
    index = "model.safetensors.index.json";
  } else {
    for (const auto& p : paths)
      if (is_top_level(p) && select_ends_with(p, ".safetensors.index.json")) {
        index = p;
        break;
      }
  }
  if (!index.empty()) {
    const std::string prefix = index.substr(0, index.size() - std::string(".safetensors.index.json").size());
    for (const auto& p : paths) {
      auto shard = parse_shard_name(p);
      if (is_top_level(p) && shard && shard->set == prefix + ".safetensors") weights.push_back(p);
    }
    if (all.count(prefix + ".safetensors")) weights.push_back(prefix + ".safetensors");
    sel.files.push_back(index);
  }
  if (weights.empty()) {
    if (all.count("model.safetensors")) {
      weights.push_back("model.safetensors");
    } else {
      for (const auto& p : paths)
        if (is_top_level(p) && select_ends_with(p, ".safetensors")) weights.push_back(p);
    }
  }
  sel.files.insert(sel.files.end(), weights.begin(), weights.end());
  for (const char* extra : kSafetensorsExtras)
    if (all.count(extra)) sel.files.push_back(extra);
  std::sort(sel.files.begin(), sel.files.end());
  return sel;
}

}  // namespace

std::optional<ShardName> parse_shard_name(const std::string& path) {
  // NAME-00001-of-00003.EXT: NAME not empty, five digits each, EXT of letters and digits
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || dot + 1 == path.size() || dot < 16) return std::nullopt;
  for (size_t i = dot + 1; i < path.size(); ++i)
    if (!std::isalnum(static_cast<unsigned char>(path[i]))) return std::nullopt;
  const size_t start = dot - 15;  // "-00001-of-00003" is 15 characters
  if (path[start] != '-' || path.compare(start + 6, 4, "-of-") != 0) return std::nullopt;
  for (size_t i : {1, 2, 3, 4, 5, 10, 11, 12, 13, 14})
    if (!std::isdigit(static_cast<unsigned char>(path[start + i]))) return std::nullopt;
  ShardName s;
  s.set = path.substr(0, start) + path.substr(dot);
  s.index = std::stoi(path.substr(start + 1, 5));
  s.count = std::stoi(path.substr(start + 10, 5));
  if (s.index < 1 || s.index > s.count) return std::nullopt;
  return s;
}

namespace {

bool all_digits(const std::string& s, size_t from, size_t to) {
  if (from >= to) return false;
  for (size_t i = from; i < to; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// Quant names as they appear in GGUF file names (uppercase): Q8_0, Q4_K_M, IQ4_XS, Q4_K_XL,
// TQ1_0, F16, BF16, F32, MXFP4, ...
bool is_quant_token(const std::string& t) {
  for (const char* plain : {"F16", "F32", "BF16", "FP16", "FP32", "MXFP4", "MXFP4_MOE"})
    if (t == plain) return true;
  size_t i = 0;
  if (t.rfind("TQ", 0) == 0) i = 2;
  else if (t.rfind("IQ", 0) == 0) i = 2;
  else if (t.rfind("Q", 0) == 0) i = 1;
  else return false;
  size_t j = i;
  while (j < t.size() && std::isdigit(static_cast<unsigned char>(t[j]))) ++j;
  if (!all_digits(t, i, j)) return false;
  // then any number of "_" + [A-Z0-9]+
  while (j < t.size()) {
    if (t[j] != '_') return false;
    size_t k = ++j;
    while (k < t.size() && std::isalnum(static_cast<unsigned char>(t[k]))) ++k;
    if (k == j) return false;
    j = k;
  }
  return true;
}

}  // namespace

std::string gguf_quant_label(const std::string& path) {
  const std::string stem = upper(stem_of(path));
  size_t end = stem.size();
  while (end > 0) {
    size_t start = stem.find_last_of("-./", end - 1);
    start = start == std::string::npos ? 0 : start + 1;
    const std::string token = stem.substr(start, end - start);
    if (is_quant_token(token)) return token;
    if (start == 0) break;
    end = start - 1;
  }
  return "";
}

Selection select_files(const HubRef& ref, const std::vector<std::string>& paths,
                       const std::string& where) {
  const std::vector<GgufSet> sets = gguf_sets(paths);
  if (!ref.file.empty()) {
    if (std::find(paths.begin(), paths.end(), ref.file) == paths.end()) {
      std::vector<std::string> ggufs;
      for (const auto& p : paths)
        if (is_gguf(p)) ggufs.push_back(p);
      fail("file ", ref.file, " not found in ", where,
           ggufs.empty() ? "" : "; its GGUF files: ", join(ggufs));
    }
    for (const auto& s : sets)
      if (std::find(s.files.begin(), s.files.end(), ref.file) != s.files.end())
        return pick_gguf(s, where);
    Selection sel;
    sel.format = "file";
    sel.files = {ref.file};
    sel.entry = ref.file;
    return sel;
  }
  if (!ref.quant.empty()) return select_gguf_by_quant(sets, ref.quant, where);
  bool has_safetensors = false, has_config = false;
  for (const auto& p : paths) {
    if (is_top_level(p) && select_ends_with(p, ".safetensors")) has_safetensors = true;
    if (p == "config.json") has_config = true;
  }
  if (has_safetensors && (has_config || sets.empty())) return select_safetensors(paths);
  if (!sets.empty()) return select_default_gguf(sets, where);
  std::vector<std::string> shown(paths.begin(), paths.begin() + std::min<size_t>(paths.size(), 12));
  fail(where, " has no safetensors or GGUF weights brisk can load (files: ",
       shown.empty() ? "none" : join(shown), paths.size() > shown.size() ? ", ..." : "", ")");
}

}  // namespace brisk::hub
