// Tensor parallelism on the CUDA backend (cuda_backend_impl.h): the sum of the ranks' partial
// outputs of a row-parallel matmul, ncclAllReduce in place on this backend's stream. It is one
// launch of the step's queue, so a decode step stays one CUDA graph per GPU (NCCL calls are
// capturable); every rank issues the same sequence of all-reduces, each from its own host thread.
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_nccl.h"
#include "core/log.h"

namespace brisk::cuda {

void CudaBackend::all_reduce(const AllReduceArgs& a) {
  BRISK_CHECK(a.tp != nullptr && a.tp->comm != nullptr, "cuda backend: all_reduce without a communicator");
  BRISK_CHECK(a.x.row_stride() == a.x.cols, "all_reduce: rows of ", a.x.cols, " floats with a stride of ",
              a.x.row_stride(), " (the CUDA all-reduce takes dense rows)");
  key_.add(uint64_t(113));
  key_.add(a.x);
  forget_quant();
  void* comm = a.tp->comm;
  float* data = a.x.data;
  const size_t count = size_t(a.x.rows) * size_t(a.x.cols);
  if (count == 0) return;
  enqueue("all_reduce", [comm, data, count](cudaStream_t s) {
    const std::string err = nccl_all_reduce_sum_f32(comm, data, count, s);
    if (err.empty()) return cudaSuccess;
    log_warn("cuda backend: ncclAllReduce failed: ", err);
    return cudaErrorUnknown;
  });
}

}  // namespace brisk::cuda
