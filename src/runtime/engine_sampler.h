// The scheduler's TokenSampler backed by the engine's Sampler chain (runtime/sampler.h).
#pragma once
#include "runtime/scheduler.h"

namespace brisk {

SamplerFactory engine_sampler_factory();

}  // namespace brisk
