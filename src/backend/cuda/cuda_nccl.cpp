#include "backend/cuda/cuda_nccl.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"

namespace brisk::cuda {

namespace {

// The NCCL C ABI (nccl.h, stable since NCCL 2): opaque handles, enums as ints.
using NcclResult = int;                       // ncclResult_t; 0 = ncclSuccess
using NcclComm = void*;                       // ncclComm_t
constexpr int kNcclFloat32 = 7;               // ncclFloat32
constexpr int kNcclSum = 0;                   // ncclSum

struct NcclApi {
  NcclResult (*comm_init_all)(NcclComm* comms, int ndev, const int* devlist) = nullptr;
  NcclResult (*comm_destroy)(NcclComm comm) = nullptr;
  NcclResult (*all_reduce)(const void* send, void* recv, size_t count, int datatype, int op, NcclComm comm,
                           void* stream) = nullptr;
  const char* (*error_string)(NcclResult r) = nullptr;
  NcclResult (*get_version)(int* version) = nullptr;
};

template <typename Fn>
bool nccl_resolve(void* lib, const char* name, Fn& out) {
  out = reinterpret_cast<Fn>(dlsym(lib, name));
  return out != nullptr;
}

struct NcclLoaded {
  NcclApi api;
  bool ok = false;
  std::string why;
};

const NcclLoaded& nccl_loaded() {
  static NcclLoaded l;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#ifdef BRISK_NCCL_DIR
    if (!lib) lib = dlopen(BRISK_NCCL_DIR "/libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
#endif
    if (!lib) {
      const char* e = dlerror();
      l.why = str_cat("libnccl.so.2 not found (", e ? e : "dlopen failed",
                      "): install NCCL (e.g. the libnccl2 package) or put it on LD_LIBRARY_PATH");
      return;
    }
    NcclApi& a = l.api;
    if (!nccl_resolve(lib, "ncclCommInitAll", a.comm_init_all) || !nccl_resolve(lib, "ncclCommDestroy", a.comm_destroy) ||
        !nccl_resolve(lib, "ncclAllReduce", a.all_reduce) || !nccl_resolve(lib, "ncclGetErrorString", a.error_string) ||
        !nccl_resolve(lib, "ncclGetVersion", a.get_version)) {
      l.why = "libnccl.so.2 lacks a symbol brisk needs (ncclCommInitAll, ncclAllReduce, ...)";
      return;  // the library stays loaded: unloading a CUDA library mid-process is not safe
    }
    l.ok = true;
  });
  return l;
}

}  // namespace

std::string nccl_unavailable_reason() { return nccl_loaded().why; }

NcclGroup::~NcclGroup() {
  const NcclLoaded& l = nccl_loaded();
  if (!l.ok) return;
  for (void* c : comms_)
    if (c) l.api.comm_destroy(c);
}

std::shared_ptr<NcclGroup> nccl_group_create(const std::vector<int>& devices) {
  const NcclLoaded& l = nccl_loaded();
  BRISK_CHECK(l.ok, "tensor parallelism over ", devices.size(), " GPUs needs NCCL: ", l.why);
  BRISK_CHECK(!devices.empty(), "nccl_group_create: no devices");
  std::shared_ptr<NcclGroup> g(new NcclGroup());
  g->comms_.assign(devices.size(), nullptr);
  const NcclResult r = l.api.comm_init_all(g->comms_.data(), int(devices.size()), devices.data());
  if (r != 0) {
    g->comms_.assign(devices.size(), nullptr);
    fail("NCCL: ncclCommInitAll over ", devices.size(), " GPUs failed: ", l.api.error_string(r));
  }
  return g;
}

std::string nccl_all_reduce_sum_f32(void* comm, float* data, size_t count, void* stream) {
  const NcclLoaded& l = nccl_loaded();
  if (!l.ok) return l.why;
  const NcclResult r = l.api.all_reduce(data, data, count, kNcclFloat32, kNcclSum, comm, stream);
  return r == 0 ? std::string() : std::string(l.api.error_string(r));
}

}  // namespace brisk::cuda
