// Parsing and validation of Hub references. Everything here is untrusted user or server text
// that later becomes part of a file path or a URL, so the rules are strict.
#include "hub/reference.h"

#include <cctype>

#include "core/error.h"

namespace brisk::hub {
namespace {

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

// Hub rules for an org or repo name: 1..96 of [A-Za-z0-9._-], no "--" or "..", not starting
// or ending with '-' or '.'.
void check_name_part(const std::string& ref, const std::string& part, const char* what) {
  BRISK_CHECK(!part.empty(), "model reference '", ref, "': empty ", what,
              " (expected org/name, org/name:QUANT, org/name/file.gguf or org/name@revision)");
  BRISK_CHECK(part.size() <= 96, "model reference '", ref, "': ", what, " is too long");
  for (char c : part)
    BRISK_CHECK(is_name_char(c), "model reference '", ref, "': ", what, " '", part,
                "' has a character other than letters, digits, '-', '_' and '.'");
  BRISK_CHECK(part.find("--") == std::string::npos && part.find("..") == std::string::npos,
              "model reference '", ref, "': ", what, " '", part, "' contains '--' or '..'");
  BRISK_CHECK(part.front() != '-' && part.front() != '.' && part.back() != '-' &&
                  part.back() != '.',
              "model reference '", ref, "': ", what, " '", part,
              "' starts or ends with '-' or '.'");
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

std::string HubRef::to_string() const {
  std::string s = repo_id;
  if (!file.empty()) s += "/" + file;
  if (revision_given) s += "@" + revision;
  if (!quant.empty()) s += ":" + quant;
  return s;
}

bool is_safe_repo_path(const std::string& path) {
  if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
  size_t start = 0;
  while (true) {
    const size_t slash = path.find('/', start);
    const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos
                                                                           : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  for (char c : path)
    if (c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

bool is_safe_revision(const std::string& revision) {
  if (!is_safe_repo_path(revision) || revision.size() > 256) return false;
  for (char c : revision)
    if (!(is_name_char(c) || c == '/' || c == '+')) return false;
  return true;
}

bool is_commit_hash(const std::string& s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool looks_like_local_path(const std::string& text) {
  if (text.empty()) return false;
  if (text[0] == '/' || text[0] == '~' || starts_with(text, "./") || starts_with(text, "../") ||
      text == "." || text == "..")
    return true;
  return false;
}

HubRef parse_hub_ref(const std::string& text) {
  BRISK_CHECK(!text.empty(), "empty model reference");
  std::string s = text;
  for (const char* prefix : {"https://huggingface.co/", "http://huggingface.co/",
                             "huggingface.co/", "https://hf.co/", "hf.co/"})
    if (starts_with(s, prefix)) {
      s = s.substr(std::string(prefix).size());
      break;
    }
  HubRef ref;
  // ":QUANT" is after the last '/' and after any '@'.
  const size_t last_slash = s.rfind('/');
  BRISK_CHECK(last_slash != std::string::npos, "model reference '", text,
              "' is neither an existing path nor org/name (expected org/name, org/name:QUANT, "
              "org/name/file.gguf or org/name@revision)");
  const size_t colon = s.find(':', last_slash);
  if (colon != std::string::npos) {
    ref.quant = s.substr(colon + 1);
    s = s.substr(0, colon);
    BRISK_CHECK(!ref.quant.empty() && ref.quant.size() <= 64, "model reference '", text,
                "': empty or too long quant after ':'");
    for (char c : ref.quant)
      BRISK_CHECK(is_name_char(c), "model reference '", text, "': quant '", ref.quant,
                  "' has a character other than letters, digits, '-', '_' and '.'");
  }
  const size_t at = s.find('@');
  if (at != std::string::npos) {
    ref.revision = s.substr(at + 1);
    ref.revision_given = true;
    s = s.substr(0, at);
    BRISK_CHECK(is_safe_revision(ref.revision), "model reference '", text, "': revision '",
                ref.revision, "' is not a valid branch, tag or commit name");
  } else {
    ref.revision = "main";
  }
  const size_t slash1 = s.find('/');
  BRISK_CHECK(slash1 != std::string::npos, "model reference '", text,
              "': expected org/name before '@' or ':'");
  const size_t slash2 = s.find('/', slash1 + 1);
  const std::string org = s.substr(0, slash1);
  const std::string name =
      s.substr(slash1 + 1, slash2 == std::string::npos ? std::string::npos : slash2 - slash1 - 1);
  check_name_part(text, org, "organization");
  check_name_part(text, name, "repository name");
  ref.repo_id = org + "/" + name;
  if (slash2 != std::string::npos) {
    ref.file = s.substr(slash2 + 1);
    BRISK_CHECK(is_safe_repo_path(ref.file), "model reference '", text, "': file path '",
                ref.file, "' is not a plain relative path");
    BRISK_CHECK(ref.quant.empty(), "model reference '", text,
                "' names both a file and a quant: give one of them");
  }
  return ref;
}

}  // namespace brisk::hub
