// The speculative-decoding options that generate, run, serve and bench share (docs/cli.md):
// --spec ngram|mtp|none, --draft-model/-md/--model-draft MODEL, --draft-max N, --draft-min N,
// --spec-ngram-min / --spec-ngram-max N, --no-spec-adaptive; and the SpecOptions they make for a
// loaded target model (the draft model loaded beside it).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "cli/args.h"
#include "runtime/engine_api.h"
#include "runtime/speculative.h"

namespace brisk::cli {

struct SpecArgs {
  std::string spec;          // "", "ngram", "mtp", "none" (bench also: "oracle", "draft")
  std::string draft_model;   // path or Hub reference
  int32_t draft_max = 4;
  int32_t draft_min = 0;
  int32_t ngram_min = 1;
  int32_t ngram_max = 4;
  bool no_adaptive = false;
  std::string hf_token;      // for a Hub draft model
};

// `extra_sources`: further --spec values the command accepts (bench: "oracle", "draft").
void add_spec_options(ArgParser& p, SpecArgs* args, const std::string& extra_sources = {});

// Whether any speculation was asked for.
bool spec_requested(const SpecArgs& a);

// SpecOptions for the target `model` (path `model_path`): no source when none was asked.
// `draft_context`: the draft model's context (n_ctx, n_seq_max, threads and device like the
// target's). Throws for a source the model cannot run or a draft model of another vocabulary.
SpecOptions make_spec_options(const SpecArgs& a, const Model& model, const std::string& model_path,
                              const ContextOptions& draft_context);

// "speculative (ngram): 40 steps, 120 of 160 drafted tokens kept (75.0 %), 3.00 kept per step"
std::string spec_summary(const char* source, uint64_t steps, uint64_t drafted, uint64_t accepted);

}  // namespace brisk::cli
