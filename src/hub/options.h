// Settings of the Hub client. Empty fields are filled from the environment the way
// huggingface_hub reads it (see hub_options_from_env), so a cache and token set up for the
// Python tools are used as they are.
#pragma once
#include <cstdint>
#include <string>

namespace brisk {

enum class HubProgress { automatic, bar, lines, quiet };  // automatic: bar on a terminal

struct HubOptions {
  std::string endpoint{};        // "": $HF_ENDPOINT, else https://huggingface.co
  std::string token{};           // "": $HF_TOKEN, else the file $HF_TOKEN_PATH or $HF_HOME/token
  std::string cache_dir{};       // "": $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub
  bool offline = false;        // also on when HF_HUB_OFFLINE is set: never use the network
  int32_t n_parallel = 4;      // files downloaded at the same time (shards)
  HubProgress progress = HubProgress::automatic;
  bool verify_cached = false;  // re-hash files already in the cache against the Hub's sha256
};

// Returns `opt` with every empty field filled from the environment; the endpoint loses any
// trailing '/'.
HubOptions hub_options_from_env(HubOptions opt);

}  // namespace brisk
