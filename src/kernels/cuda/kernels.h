// Launchers of the CUDA kernels, one op family per .cu file. Every pointer inside the
// argument structs (including Weight::data, bias, norm weights, ids/pos/seq) must already be
// device memory; the backend (backend/cuda/cuda_backend.cpp) uploads and checks them. Each
// launcher enqueues on `stream` and returns the launch status (cudaGetLastError).
#pragma once
#include <cuda_runtime.h>

#include "backend/backend.h"

namespace brisk::cuda {

// True for the weight formats the matmul and embedding kernels decode directly.
bool weight_format_on_device(QuantType t);

// How activations are rounded before a matmul, as the CPU backend does: through the weight
// format's vec_dot_type (Q8_0 for Q8_0/Q4_0 weights, Q8_K for K-quants, F16 for F16, ...).
enum class ActRound { none, f16, bf16, q8_0, q8_k };
ActRound act_round_for(QuantType vec_dot_type);
// dst [x.rows, x.cols] (dense) = x rounded through `kind`; x.cols a multiple of its block.
cudaError_t launch_round_activations(ActRound kind, float* dst, const Mat& x, cudaStream_t stream);

cudaError_t launch_matmul(const MatmulArgs& a, cudaStream_t stream);
cudaError_t launch_embedding(const EmbeddingArgs& a, cudaStream_t stream);
cudaError_t launch_rms_norm(const RmsNormArgs& a, cudaStream_t stream);
// inv_freq: device [table.n_rot / 2]
cudaError_t launch_rope(const RopeArgs& a, const float* inv_freq, cudaStream_t stream);
cudaError_t launch_kv_store(const KvStoreArgs& a, cudaStream_t stream);
cudaError_t launch_attention(const AttentionArgs& a, cudaStream_t stream);
cudaError_t launch_gated_act(const GatedActArgs& a, cudaStream_t stream);
cudaError_t launch_add(const AddArgs& a, cudaStream_t stream);
cudaError_t launch_softcap(const SoftcapArgs& a, cudaStream_t stream);
cudaError_t launch_get_rows(const GetRowsArgs& a, cudaStream_t stream);

}  // namespace brisk::cuda
