// Model references as users type them:
//   org/name                 a safetensors repo, or a GGUF repo (default quant)
//   org/name:Q4_K_M          the GGUF file(s) of that quant (case-insensitive, shards included)
//   org/name/path/file.gguf  one file of the repo (all shards when it is a shard)
//   org/name@revision        any of the above at a branch, tag or commit (default "main")
// optionally prefixed by "hf.co/", "huggingface.co/" or "https://huggingface.co/".
// Local paths are not references: callers check for an existing path first.
#pragma once
#include <string>

namespace brisk::hub {

struct HubRef {
  std::string repo_id;   // "org/name"
  std::string revision;  // "main" unless given
  std::string quant;     // "" or as typed (matching is case-insensitive)
  std::string file;      // "" or a path inside the repo
  bool revision_given = false;

  std::string to_string() const;  // canonical form, for messages
};

// Parses a reference; brisk::Error naming the reference and the part that is wrong.
HubRef parse_hub_ref(const std::string& text);

// True when `text` is written as a local path rather than a reference (starts with '/', './',
// '../' or '~'): such text is never sent to the Hub.
bool looks_like_local_path(const std::string& text);

// Checks that a repo-relative path is safe to place under a snapshot folder: non-empty, not
// absolute, no empty, "." or ".." components, no backslash or control characters.
bool is_safe_repo_path(const std::string& path);
// Checks a revision name (branch, tag, commit, "refs/pr/N"): same rules as paths, limited
// characters.
bool is_safe_revision(const std::string& revision);
// True for 40 lowercase hex digits (a git commit hash).
bool is_commit_hash(const std::string& s);

}  // namespace brisk::hub
