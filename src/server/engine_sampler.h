// The scheduler's TokenSampler backed by the engine's Sampler chain (runtime/sampler.h).
#pragma once
#include "server/scheduler.h"

namespace brisk::server {

SamplerFactory engine_sampler_factory();

}  // namespace brisk::server
