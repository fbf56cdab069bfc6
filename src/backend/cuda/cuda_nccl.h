// NCCL for tensor parallelism over the GPUs of one host, loaded with dlopen("libnccl.so.2")
// when the first group is made, not linked: the binary starts and runs on one GPU (or the CPU)
// on machines without NCCL. The few entry points used are declared here by their stable C ABI
// (nccl.h is not needed to build).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace brisk::cuda {

// One communicator per GPU of a group (ncclCommInitAll from one thread): rank i on devices[i].
class NcclGroup {
 public:
  ~NcclGroup();
  int size() const { return int(comms_.size()); }
  // Rank r's communicator (an ncclComm_t), for TpRank::comm.
  void* comm(int rank) const { return comms_.at(size_t(rank)); }

 private:
  friend std::shared_ptr<NcclGroup> nccl_group_create(const std::vector<int>& devices);
  std::vector<void*> comms_;
};

// Throws brisk::Error naming the cause when NCCL cannot be loaded (the library or a symbol is
// missing) or the communicators cannot be made.
std::shared_ptr<NcclGroup> nccl_group_create(const std::vector<int>& devices);

// In place: data [count] float32 := the sum over the group, queued on `stream` (a cudaStream_t;
// capturable into a CUDA graph). Returns "" or the NCCL error text.
std::string nccl_all_reduce_sum_f32(void* comm, float* data, size_t count, void* stream);

// "" when libnccl.so.2 loads with every symbol used, else why not.
std::string nccl_unavailable_reason();

}  // namespace brisk::cuda
