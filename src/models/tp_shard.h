// Tensor parallelism: the slice of a dense decoder (Llama, Mistral, Qwen2, Qwen3) that rank r of
// a group of n holds. Per layer, with H query heads, Hkv KV heads and an MLP of F rows:
//   column parallel (output rows sliced): attn_q rows of heads [r H/n, (r+1) H/n), attn_k /
//     attn_v rows of KV heads [r Hkv/n, (r+1) Hkv/n), their biases, ffn_gate / ffn_up rows
//     [r F/n, (r+1) F/n);
//   row parallel (input columns sliced): attn_output's columns of the rank's heads, ffn_down's
//     columns of its MLP rows. Each rank's product is a partial sum of the full one; the blocks
//     add the ranks' partial sums (Backend::all_reduce) before the residual add. A bias of a
//     row-parallel matmul stays on rank 0 only (the others get zeros), so it is added once.
//   replicated: norms, embeddings, the LM head, rope factors, per-head q / k norms.
// Qwen3-MoE's experts split by their MLP rows the same way (each expert's gate / up rows
// [r F_exp/n, (r+1) F_exp/n), its down columns to match, the router replicated): every rank
// routes alike and the MoE output is a partial sum like a dense MLP's.
// The shard's config is the model's with n_head / n, n_head_kv / n and n_ff / n, so that the
// forward and the KV cache run unchanged on fewer heads. Row slices are views of the model's
// bytes; column slices of a matrix are copies owned by the shard's store, and of a
// block-quantized matrix they must fall on block boundaries.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/config.h"
#include "models/weights.h"

namespace brisk {

// Throws brisk::Error naming the numbers when `cfg` (architecture cfg.arch) cannot be split
// over `world` ranks: an architecture other than the dense decoders, experts, fewer KV heads
// than ranks, or heads / KV heads / MLP rows (of any layer) not divisible by world.
void tp_check_split(const ModelConfig& cfg, int32_t world);

// The config of one rank's shard (tp_check_split passed).
ModelConfig tp_shard_config(const ModelConfig& cfg, int32_t world);

// Rank `rank`'s tensors: slices of `full` (whose bytes must outlive the result) as described
// above. Throws naming the tensor when a column split does not fall on its format's blocks.
std::unique_ptr<WeightStore> tp_shard_weights(const WeightStore& full, const ModelConfig& cfg, int32_t rank,
                                              int32_t world);

// Rows [first, first + count) of a 2-D tensor (a 1-D tensor: elements), a view of t's bytes.
StoredTensor tp_slice_rows(const StoredTensor& t, int64_t first, int64_t count);
// Columns [first, first + count) of every row of a 2-D tensor, copied into *bytes (t's data
// then points there once the caller keeps *bytes alive).
StoredTensor tp_slice_cols(const StoredTensor& t, int64_t first, int64_t count, std::vector<uint8_t>* bytes);

}  // namespace brisk
