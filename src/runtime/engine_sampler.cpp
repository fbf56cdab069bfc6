#include "runtime/engine_sampler.h"

#include "runtime/sampler.h"

namespace brisk {
namespace {

class EngineSampler : public TokenSampler {
 public:
  EngineSampler(const SamplerParams& p, int32_t n_vocab) : sampler_(p, n_vocab) {}
  int32_t sample(const float* logits, const std::vector<bool>* allowed) override {
    return sampler_.sample(logits, allowed);
  }
  void accept(int32_t token) override { sampler_.accept(token); }
  Sampler* device_sampler() override { return &sampler_; }

 private:
  Sampler sampler_;
};

}  // namespace

SamplerFactory engine_sampler_factory() {
  return [](const SamplerParams& p, int32_t n_vocab) -> std::unique_ptr<TokenSampler> {
    return std::make_unique<EngineSampler>(p, n_vocab);
  };
}

}  // namespace brisk
