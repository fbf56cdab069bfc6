// Tensors of a checkpoint by their GGUF (llama.cpp) names, whatever the file: GGUF tensors are
// used in place; safetensors tensors are renamed through the Hugging Face -> GGUF name map
// (models/name_map.h), transposed in description only (HF shape [out, in] is GGUF ne
// {in, out}) and kept in their stored dtype (F32, F16, BF16; others widened to F32). With a
// load-time quant type, 2-D matmul weights are quantized once here. Views stay valid while
// the store lives.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "quant/types.h"

namespace brisk {

namespace gguf { class File; }
namespace safetensors { class Checkpoint; }

struct StoredTensor {
  std::string name;            // GGUF name, e.g. "blk.0.attn_q.weight"
  QuantType type = QuantType::F32;
  std::vector<int64_t> ne;     // GGUF order: ne[0] innermost
  const void* data = nullptr;
  size_t n_bytes = 0;
  bool writable = false;       // bytes in memory the store may rewrite (not a file mapping)
};

class WeightStore {
 public:
  // From a GGUF file already opened (shared so the store keeps the bytes alive).
  static std::unique_ptr<WeightStore> from_gguf(std::shared_ptr<const gguf::File> file);
  // From a safetensors checkpoint; `hf_to_gguf` maps HF names (returns "" to drop a tensor).
  // quant: QuantType::F32 means "keep stored formats".
  static std::unique_ptr<WeightStore> from_safetensors(
      std::shared_ptr<const safetensors::Checkpoint> ckpt,
      std::string (*hf_to_gguf)(const std::string&), std::optional<QuantType> quant);

  const StoredTensor* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }

  // A 2-D weight [n_out, n_in]; throws naming the tensor when missing or of another shape.
  Weight matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // Optional variant: empty Weight when absent.
  Weight matrix_opt(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A contiguous tensor of any rank viewed as a 2-D weight [n_out, n_in]: its outermost
  // dimension is n_out and the others multiply to n_in (a convolution weight [n_out, n_in_ch,
  // kernel] as [n_out, n_in_ch * kernel]). Throws naming the tensor when missing or mismatched.
  Weight matrix_flat(const std::string& name, int64_t n_in, int64_t n_out) const;
  // A 1-D vector of n floats (converted to F32 once and owned by the store).
  const float* vector(const std::string& name, int64_t n);
  const float* vector_opt(const std::string& name, int64_t n);

  // Rewrites in place the 2-D matmul weights (blk.*.weight, output.weight, token_embd.weight)
  // whose format layout_of maps to another layout of the same bytes (quant/repack.h), where
  // the store may write them; call before taking views. Returns the number of tensors rewritten.
  int repack_matmul_weights(std::optional<QuantType> (*layout_of)(QuantType stored));

  uint64_t total_bytes() const;
  uint64_t total_elements() const;

 private:
  std::map<std::string, StoredTensor> tensors_;
  std::vector<std::vector<uint8_t>> owned_;            // converted / quantized data
  std::map<std::string, std::vector<float>> vectors_;  // 1-D tensors as F32
  std::shared_ptr<const gguf::File> gguf_;
  std::shared_ptr<const safetensors::Checkpoint> st_;
};

}  // namespace brisk
