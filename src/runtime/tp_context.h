// Tensor-parallel contexts (ContextOptions::tp, or a device list "cuda:0,1,..."): N rank
// contexts, each a model context of its shard (models/tp_shard.h) on its own backend with its own
// KV cache of its heads, run every forward together, each on its own host thread; the blocks sum
// the ranks' partial outputs (Backend::all_reduce: the in-process HostComm on the CPU, NCCL on
// CUDA). The LM head is replicated, so every rank computes the logits; rank 0's are returned.
// A world of 1 runs the same path (one shard holding the whole model) with no all-reduce.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "runtime/engine_api.h"

namespace brisk {

class LoadedModel;

// Whether `o` asks for a tensor-parallel context: tp >= 1, or a device list.
bool tp_requested(const ContextOptions& o);
// The ranks' devices for `o`: "cpu" per rank, or "cuda:i" per rank from the list, from "cuda" /
// "auto" (GPUs 0..tp-1). Throws usage errors naming the numbers: tp < 0, a list whose length
// differs from tp, one GPU named for several ranks, more ranks than GPUs.
std::vector<std::string> tp_rank_devices(const ContextOptions& o);

std::unique_ptr<Context> tp_context_create(std::shared_ptr<const LoadedModel> model, const ContextOptions& options);

// A model context of one rank (runtime/context.cpp): `shard` on `backend`, summing over tp's
// group.
std::unique_ptr<Context> context_create_rank(std::shared_ptr<const LoadedModel> shard, const ContextOptions& options,
                                             std::unique_ptr<Backend> backend, const TpRank& tp);

}  // namespace brisk
