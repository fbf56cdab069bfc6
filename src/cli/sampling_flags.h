// Command-line flags shared by the commands that sample (generate, run): --temp, --top-k,
// --top-p, --min-p, the penalties and --seed, parsed into SamplerParams; plus the checked
// number parsing the commands use for their other flags.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/sampler.h"

namespace brisk::cli {

int32_t parse_int_flag(const std::string& flag, const std::string& value);
float parse_float_flag(const std::string& flag, const std::string& value);

// When argv[i] is a sampling flag, reads its value (advancing i) into `params` and returns
// true; otherwise returns false and leaves both alone.
bool parse_sampling_flag(const std::vector<std::string>& argv, size_t& i, SamplerParams& params);

// Usage lines for the flags above.
extern const char* const kSamplingFlagsUsage;

}  // namespace brisk::cli
