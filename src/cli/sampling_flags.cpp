#include "cli/sampling_flags.h"

#include <climits>
#include <stdexcept>

#include "core/error.h"

namespace brisk::cli {

int32_t parse_int_flag(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used != v.size() || x < INT32_MIN || x > INT32_MAX) throw std::invalid_argument(v);
    return int32_t(x);
  } catch (const std::exception&) {
    fail(flag, ": '", v, "' is not an integer");
  }
}

float parse_float_flag(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    const float x = std::stof(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return x;
  } catch (const std::exception&) {
    fail(flag, ": '", v, "' is not a number");
  }
}

namespace {

uint64_t parse_seed(const std::string& flag, const std::string& v) {
  try {
    size_t used = 0;
    if (v.empty() || v[0] == '-') throw std::invalid_argument(v);
    const unsigned long long x = std::stoull(v, &used);
    if (used != v.size()) throw std::invalid_argument(v);
    return uint64_t(x);
  } catch (const std::exception&) {
    fail(flag, ": '", v, "' is not a non-negative integer");
  }
}

}  // namespace

bool parse_sampling_flag(const std::vector<std::string>& argv, size_t& i, SamplerParams& p) {
  const std::string& f = argv[i];
  const bool known = f == "--temp" || f == "--top-k" || f == "--top-p" || f == "--min-p" ||
                     f == "--repeat-penalty" || f == "--presence-penalty" || f == "--frequency-penalty" ||
                     f == "--repeat-last-n" || f == "--seed";
  if (!known) return false;
  BRISK_CHECK(i + 1 < argv.size(), f, " needs a value");
  const std::string& v = argv[++i];
  if (f == "--temp") p.temperature = parse_float_flag(f, v);
  else if (f == "--top-k") p.top_k = parse_int_flag(f, v);
  else if (f == "--top-p") p.top_p = parse_float_flag(f, v);
  else if (f == "--min-p") p.min_p = parse_float_flag(f, v);
  else if (f == "--repeat-penalty") p.repeat_penalty = parse_float_flag(f, v);
  else if (f == "--presence-penalty") p.presence_penalty = parse_float_flag(f, v);
  else if (f == "--frequency-penalty") p.frequency_penalty = parse_float_flag(f, v);
  else if (f == "--repeat-last-n") p.penalty_last_n = parse_int_flag(f, v);
  else p.seed = parse_seed(f, v);
  return true;
}

const char* const kSamplingFlagsUsage =
    "  [--temp T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--repeat-last-n N]\n"
    "  [--presence-penalty P] [--frequency-penalty F] [--seed S]\n";

}  // namespace brisk::cli
