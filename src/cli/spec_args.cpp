#include "cli/spec_args.h"

#include <cstdio>

#include "cli/model_arg.h"

namespace brisk::cli {

void add_spec_options(ArgParser& p, SpecArgs* a, const std::string& extra_sources) {
  p.section("Speculative decoding");
  const std::string sources = "ngram | mtp | none" + (extra_sources.empty() ? "" : " | " + extra_sources);
  p.option({"--spec"}, "SOURCE", "draft source: " + sources + " (ngram: prompt lookup)", [a, extra_sources](const std::string& v) {
    const bool extra = !extra_sources.empty() && (" | " + extra_sources + " |").find(" " + v + " ") != std::string::npos;
    if (v != "ngram" && v != "mtp" && v != "none" && !extra)
      usage_fail("--spec '", v, "': use ngram, mtp or none", extra_sources.empty() ? "" : " (or " + extra_sources + ")");
    a->spec = v;
  });
  p.text({"-md", "--draft-model", "--model-draft"}, &a->draft_model, "MODEL",
         "draft model with the target's vocabulary (GGUF, Hugging Face folder or Hub reference)");
  p.integer({"--draft-max", "--draft", "--draft-n"}, &a->draft_max, 1, 64, "N", "tokens drafted per step at most (default 4)");
  p.integer({"--draft-min", "--draft-n-min"}, &a->draft_min, 0, 64, "N",
            "decode plainly when fewer tokens are drafted (default 0)");
  p.integer({"--spec-ngram-min"}, &a->ngram_min, 1, 64, "N", "shortest n-gram looked up (default 1)");
  p.integer({"--spec-ngram-max"}, &a->ngram_max, 1, 64, "N", "longest n-gram looked up (default 4)");
  p.flag({"--no-spec-adaptive"}, &a->no_adaptive, "draft --draft-max tokens every step instead of following the acceptance rate");
}

bool spec_requested(const SpecArgs& a) { return (!a.spec.empty() && a.spec != "none") || !a.draft_model.empty(); }

SpecOptions make_spec_options(const SpecArgs& a, const Model& model, const std::string& model_path,
                              const ContextOptions& draft_context) {
  SpecOptions o{.draft_max = a.draft_max, .draft_min = a.draft_min, .adaptive = !a.no_adaptive};
  if (a.draft_min > a.draft_max) usage_fail("--draft-min ", a.draft_min, " is above --draft-max ", a.draft_max);
  if (a.ngram_min > a.ngram_max)
    usage_fail("--spec-ngram-min ", a.ngram_min, " is above --spec-ngram-max ", a.ngram_max);
  if (!a.draft_model.empty() && !a.spec.empty() && a.spec != "draft")
    usage_fail("--spec ", a.spec, " and --draft-model: give one draft source");
  if (!a.draft_model.empty()) {
    const std::string path = resolve_model(a.draft_model, a.hf_token);
    auto draft = load_model({.path = path, .n_threads = draft_context.n_threads});
    o.source = draft_source_model({.model = draft,
                                   .name = a.draft_model,
                                   .target_name = model_path,
                                   .target_n_vocab = model.info().n_vocab,
                                   .target_n_tokens = model.tokenizer() ? model.tokenizer()->vocab_size() : 0,
                                   .context = draft_context});
  } else if (a.spec == "ngram") {
    o.source = draft_source_ngram({.ngram_min = a.ngram_min, .ngram_max = a.ngram_max});
  } else if (a.spec == "mtp") {
    fail("--spec mtp: running the multi-token-prediction layers of ", model_path,
         " is not supported yet; use --spec ngram or --draft-model");
  } else if (a.spec == "draft") {
    usage_fail("--spec draft needs --draft-model MODEL");
  }
  return o;
}

std::string spec_summary(const char* source, uint64_t steps, uint64_t drafted, uint64_t accepted) {
  char b[256];
  std::snprintf(b, sizeof b, "speculative (%s): %llu verify steps, %llu of %llu drafted tokens kept (%.1f %%), %.2f kept per step",
                source, static_cast<unsigned long long>(steps), static_cast<unsigned long long>(accepted),
                static_cast<unsigned long long>(drafted), drafted ? 100.0 * double(accepted) / double(drafted) : 0.0,
                steps ? double(accepted) / double(steps) : 0.0);
  return b;
}

}  // namespace brisk::cli
