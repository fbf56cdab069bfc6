// Tensors of a checkpoint by their GGUF (llama.cpp) names, whatever the file: GGUF tensors are
// used in place; safetensors tensors are renamed through the Hugging Face -> GGUF name map
// (models/name_map.h), transposed in description only (HF shape [out, in] is GGUF ne
// {in, out}) and kept in their stored dtype (F32, F16, BF16; others widened to F32). With a
// load-time quant type, 2-D matmul weights are quantized once here. Views stay valid while
// the store lives.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
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

  // A 2-D weight [n_out, n_in]; throws naming the tensor when missing or of another shape. A
  // 1-D tensor of n_in elements is a weight of one row (n_out == 1).
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

  // A new tensor `name` made of rows of the 2-D tensor `src` ([n_out, n_in] in its stored
  // format, each row whole blocks) in the order `rows`, owned by the store: for checkpoints that
  // interleave what the forward keeps apart (a query with its output gate, fused projections).
  // Throws naming src when it is missing, not 2-D or a row index is out of range.
  void gather_rows(const std::string& name, const std::string& src, const std::vector<int64_t>& rows);
  // Renames every tensor whose name starts with `from` to start with `to` instead; returns how
  // many. For checkpoint names that depend on the config (e.g. a head after the layer stack).
  int rename_prefix(const std::string& from, const std::string& to);
  bool has_prefix(const std::string& prefix) const;


  // Layouts for a backend (Backend::weight_layout): the 2-D matmul weights (blk.*.weight,
  // output.weight, token_embd.weight) that the store may write (read into memory, not a file
  // mapping) are given in the layout layout_of maps their stored format to (quant/repack.h:
  // the same bytes per row, rearranged); every other tensor keeps its stored layout.
  using LayoutFn = std::function<std::optional<QuantType>(QuantType stored)>;
  // What layout_of would change here: (stored format, layout) pairs, sorted; empty when the
  // backend takes every tensor as stored.
  std::vector<std::pair<QuantType, QuantType>> layout_plan(const LayoutFn& layout_of) const;
  // Rewrites those weights in place (from the stored layout); views taken before are stale.
  // Returns the number of tensors rewritten.
  int relayout_in_place(const LayoutFn& layout_of);
  // A store of the same tensors in layout_of's layouts, from whatever layout they are in now:
  // converted copies where the layout differs, this store's bytes elsewhere (so this store
  // must outlive it). For a second backend of a model whose bytes the first one rewrote.
  std::unique_ptr<WeightStore> relaid_copy(const LayoutFn& layout_of) const;

  // Every tensor by name (models/tp_shard.h derives a shard's store from them).
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
  // Adds (or replaces) a tensor whose bytes another owner keeps alive as long as this store.
  void put_view(StoredTensor t);
  // Adds (or replaces) a tensor whose bytes this store takes (t.data is set to them).
  void put_owned(StoredTensor t, std::vector<uint8_t> bytes);

  uint64_t total_bytes() const;
  uint64_t total_elements() const;

 private:
  static QuantType layout_for(const std::string& name, const StoredTensor& t, const LayoutFn& layout_of);

  std::map<std::string, StoredTensor> tensors_;
  std::vector<std::vector<uint8_t>> owned_;            // converted / quantized data
  std::map<std::string, std::vector<float>> vectors_;  // 1-D tensors as F32
  std::shared_ptr<const gguf::File> gguf_;
  std::shared_ptr<const safetensors::Checkpoint> st_;
};

}  // namespace brisk
