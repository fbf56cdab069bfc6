#include "models/weights.h"

#include <algorithm>
#include <cstring>

#include "core/checked_math.h"
#include "core/error.h"
#include "core/log.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "kernels/cpu/ops.h"
#include "quant/format.h"
#include "quant/repack.h"

namespace brisk {

namespace {

std::string shape_str(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

std::optional<QuantType> stored_type(safetensors::DType d) {
  switch (d) {
    case safetensors::DType::F32: return QuantType::F32;
    case safetensors::DType::F16: return QuantType::F16;
    case safetensors::DType::BF16: return QuantType::BF16;
    default: return std::nullopt;
  }
}

// Which quant type a matrix of rows n_in gets for a requested load-time type: the request when
// the row is whole blocks, else a 32-element fallback (Q4_K -> Q4_0), else unchanged.
std::optional<QuantType> quant_for_row(QuantType want, int64_t n_in) {
  if (quant_row_bytes(want, uint64_t(n_in))) return want;
  if (want == QuantType::Q4_K && quant_row_bytes(QuantType::Q4_0, uint64_t(n_in))) return QuantType::Q4_0;
  return std::nullopt;
}

}  // namespace

std::unique_ptr<WeightStore> WeightStore::from_gguf(std::shared_ptr<const gguf::File> file) {
  auto ws = std::make_unique<WeightStore>();
  ws->gguf_ = file;
  for (const gguf::TensorInfo& t : file->tensors()) {
    StoredTensor st;
    st.name = t.name;
    st.type = t.type;
    for (uint64_t d : t.ne) {
      BRISK_CHECK(d <= uint64_t(INT64_MAX), "GGUF tensor ", t.name, ": dimension too large");
      st.ne.push_back(int64_t(d));
    }
    st.data = t.data;
    st.n_bytes = size_t(t.n_bytes);
    st.writable = !file->bytes()->mapped();
    ws->tensors_[t.name] = std::move(st);
  }
  return ws;
}

std::unique_ptr<WeightStore> WeightStore::from_safetensors(
    std::shared_ptr<const safetensors::Checkpoint> ckpt, std::string (*hf_to_gguf)(const std::string&),
    std::optional<QuantType> quant) {
  auto ws = std::make_unique<WeightStore>();
  ws->st_ = ckpt;
  for (const safetensors::TensorInfo& t : ckpt->tensors()) {
    const std::string name = hf_to_gguf(t.name);
    if (name.empty()) continue;
    BRISK_CHECK(!ws->tensors_.count(name), "safetensors: tensors map to the same name ", name,
                " (second: ", t.name, ")");
    StoredTensor st;
    st.name = name;
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
      BRISK_CHECK(*it <= uint64_t(INT64_MAX), "safetensors tensor ", t.name, ": dimension too large");
      st.ne.push_back(int64_t(*it));
    }
    if (st.ne.empty()) st.ne.push_back(1);
    const auto type = stored_type(t.dtype);
    const size_t elem = type ? (*type == QuantType::F32 ? 4 : 2) : 0;
    const bool aligned = type && reinterpret_cast<uintptr_t>(t.data) % elem == 0;
    // MoE routers (ffn_gate_inp, and the shared expert's gate ffn_gate_inp_shexp) stay in their
    // stored format, as llama.cpp keeps them: a rounding error there flips expert choices.
    // Learned position tables (position_embd) too: they are added to every activation, and
    // quantization noise there moves every row.
    const bool is_matrix = st.ne.size() == 2 && name.size() > 7 &&
                           name.compare(name.size() - 7, 7, ".weight") == 0 &&
                           name.find("ffn_gate_inp") == std::string::npos &&
                           name.find("position_embd.") == std::string::npos;
    const auto qt = quant && is_matrix ? quant_for_row(*quant, st.ne[0]) : std::nullopt;
    if (qt) {
      // Quantize row by row from float32.
      const std::vector<float> f = safetensors::to_f32(t);
      const size_t rb = size_t(*quant_row_bytes(*qt, uint64_t(st.ne[0])));
      std::vector<uint8_t> q(rb * size_t(st.ne[1]));
      for (int64_t r = 0; r < st.ne[1]; ++r)
        cpu::row_from_f32(*qt, f.data() + size_t(r) * size_t(st.ne[0]), q.data() + size_t(r) * rb, st.ne[0]);
      st.type = *qt;
      st.data = q.data();
      st.n_bytes = q.size();
      st.writable = true;
      ws->owned_.push_back(std::move(q));
    } else if (type && aligned) {
      st.type = *type;
      st.data = t.data;
      st.n_bytes = size_t(t.n_bytes);
    } else if (type) {  // unaligned in the file: copy
      std::vector<uint8_t> copy(t.data, t.data + t.n_bytes);
      st.type = *type;
      st.data = copy.data();
      st.n_bytes = copy.size();
      ws->owned_.push_back(std::move(copy));
    } else {
      const std::vector<float> f = safetensors::to_f32(t);
      std::vector<uint8_t> bytes(f.size() * sizeof(float));
      std::memcpy(bytes.data(), f.data(), bytes.size());
      st.type = QuantType::F32;
      st.data = bytes.data();
      st.n_bytes = bytes.size();
      ws->owned_.push_back(std::move(bytes));
    }
    ws->tensors_[name] = std::move(st);
  }
  return ws;
}

const StoredTensor* WeightStore::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

namespace {
// The rows of a tensor already checked to hold n_out x n_in elements, as a Weight.
Weight stored_weight_rows(const StoredTensor& t, int64_t n_in, int64_t n_out) {
  const auto rb = quant_row_bytes(t.type, uint64_t(n_in));
  BRISK_CHECK(rb.has_value(), "tensor ", t.name, ": rows of ", n_in, " elements are not whole ",
              quant_type_info(t.type).name, " blocks");
  const auto total = checked_mul<uint64_t>(*rb, uint64_t(n_out));
  BRISK_CHECK(total && *total <= t.n_bytes, "tensor ", t.name, ": data is shorter than its shape");
  return Weight{.type = t.type, .n_in = n_in, .n_out = n_out, .row_bytes = size_t(*rb), .data = t.data};
}
}  // namespace

Weight WeightStore::matrix_opt(const std::string& name, int64_t n_in, int64_t n_out) const {
  const StoredTensor* t = find(name);
  if (!t) return {};
  std::vector<int64_t> ne = t->ne;
  while (ne.size() > 2 && ne.back() == 1) ne.pop_back();
  if (ne.size() == 1 && n_out == 1) ne.push_back(1);
  BRISK_CHECK(ne.size() == 2 && ne[0] == n_in && ne[1] == n_out, "tensor ", name, " has shape ",
              shape_str(t->ne), ", expected {", n_in, ", ", n_out, "}");
  return stored_weight_rows(*t, n_in, n_out);
}

Weight WeightStore::matrix_flat(const std::string& name, int64_t n_in, int64_t n_out) const {
  const StoredTensor* t = find(name);
  BRISK_CHECK(t != nullptr, "missing tensor ", name, " (expected ", n_out, " rows of ", n_in, " elements)");
  int64_t inner = 1;
  for (size_t d = 0; d + 1 < t->ne.size(); ++d) inner *= t->ne[d];
  BRISK_CHECK(t->ne.size() >= 2 && inner == n_in && t->ne.back() == n_out, "tensor ", name, " has shape ",
              shape_str(t->ne), ", expected ", n_out, " rows of ", n_in, " elements");
  return stored_weight_rows(*t, n_in, n_out);
}

void WeightStore::gather_rows(const std::string& name, const std::string& src, const std::vector<int64_t>& rows) {
  const StoredTensor* t = find(src);
  BRISK_CHECK(t != nullptr, "missing tensor ", src);
  BRISK_CHECK(t->ne.size() == 2, "tensor ", src, " has shape ", shape_str(t->ne), ", expected 2 dimensions");
  const auto rb = quant_row_bytes(t->type, uint64_t(t->ne[0]));
  BRISK_CHECK(rb && *rb * uint64_t(t->ne[1]) <= t->n_bytes, "tensor ", src, ": data is shorter than its shape");
  std::vector<uint8_t> out(size_t(*rb) * rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    BRISK_CHECK(rows[i] >= 0 && rows[i] < t->ne[1], "tensor ", src, ": row ", rows[i], " out of range [0, ", t->ne[1], ")");
    std::memcpy(out.data() + i * size_t(*rb), static_cast<const uint8_t*>(t->data) + size_t(rows[i]) * size_t(*rb),
                size_t(*rb));
  }
  StoredTensor st{.name = name, .type = t->type, .ne = {t->ne[0], int64_t(rows.size())}, .data = out.data(),
                  .n_bytes = out.size(), .writable = true};
  owned_.push_back(std::move(out));
  vectors_.erase(name);
  tensors_[name] = std::move(st);
}

int WeightStore::rename_prefix(const std::string& from, const std::string& to) {
  std::vector<std::string> names;
  for (auto it = tensors_.lower_bound(from); it != tensors_.end() && it->first.compare(0, from.size(), from) == 0; ++it)
    names.push_back(it->first);
  for (const std::string& n : names) {
    StoredTensor t = std::move(tensors_[n]);
    tensors_.erase(n);
    t.name = to + n.substr(from.size());
    BRISK_CHECK(!tensors_.count(t.name), "tensor ", n, ": its new name ", t.name, " is taken");
    tensors_[t.name] = std::move(t);
  }
  return int(names.size());
}

bool WeightStore::has_prefix(const std::string& prefix) const {
  auto it = tensors_.lower_bound(prefix);
  return it != tensors_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

// The layout layout_of wants tensor t in: its stored format's layout for the 2-D matmul
// weights the store may rewrite, else its current one. (The embedding table counts: with tied
// embeddings it is the output matrix, and the lookup reads a whole row through its format's
// dequantizer, which takes the repacked layouts. Expert stacks keep their layout. The
// per-layer-embedding projection is a matmul over the whole hidden state of every token; its
// embedding table is read one row per token and keeps its stored layout.)
QuantType WeightStore::layout_for(const std::string& name, const StoredTensor& t, const LayoutFn& layout_of) {
  const bool matmul_weight = name == "output.weight" || name == "token_embd.weight" ||
                             name == "per_layer_model_proj.weight" ||
                             (name.rfind("blk.", 0) == 0 && name.size() > 7 && name.ends_with(".weight"));
  if (!matmul_weight || !t.writable || t.ne.size() < 2) return t.type;
  int64_t rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
  if (rows != t.ne[1]) return t.type;  // 2-D only
  const QuantType stored = quant::stored_type(t.type);
  const auto rb = quant_row_bytes(stored, uint64_t(t.ne[0]));
  if (!rb || *rb * uint64_t(rows) > t.n_bytes) return t.type;  // matrix() reports the problem
  return layout_of(stored).value_or(stored);
}

std::vector<std::pair<QuantType, QuantType>> WeightStore::layout_plan(const LayoutFn& layout_of) const {
  std::vector<std::pair<QuantType, QuantType>> plan;
  for (const auto& [name, t] : tensors_) {
    const QuantType stored = quant::stored_type(t.type);
    const QuantType want = layout_for(name, t, layout_of);
    if (want != stored && std::find(plan.begin(), plan.end(), std::pair{stored, want}) == plan.end())
      plan.emplace_back(stored, want);
  }
  std::sort(plan.begin(), plan.end());
  return plan;
}

int WeightStore::relayout_in_place(const LayoutFn& layout_of) {
  int n = 0;
  for (auto& [name, t] : tensors_) {
    const QuantType want = layout_for(name, t, layout_of);
    if (want == t.type) continue;
    BRISK_CHECK(!quant::is_repacked(t.type) && quant::stored_type(want) == t.type, "weights: ", name,
                " is in the ", quant_type_info(t.type).name, " layout, not stored as ",
                quant_type_info(quant::stored_type(want)).name);
    quant::repack_rows_in_place(t.type, const_cast<void*>(t.data), t.ne[1], size_t(*quant_row_bytes(t.type, uint64_t(t.ne[0]))),
                                t.ne[0] / int64_t(quant_type_info(t.type).block_size));
    t.type = want;
    ++n;
  }
  return n;
}

std::unique_ptr<WeightStore> WeightStore::relaid_copy(const LayoutFn& layout_of) const {
  auto ws = std::make_unique<WeightStore>();
  ws->tensors_ = tensors_;
  ws->gguf_ = gguf_;
  ws->st_ = st_;
  for (auto& [name, t] : ws->tensors_) {
    t.writable = false;  // this store's bytes, or a copy made for this layout
    const QuantType want = layout_for(name, tensors_.at(name), layout_of);
    if (want == t.type) continue;
    const QuantType stored = quant::stored_type(t.type);
    const int64_t rows = t.ne[1];
    const size_t rb = size_t(*quant_row_bytes(stored, uint64_t(t.ne[0])));
    const int64_t nb = t.ne[0] / int64_t(quant_type_info(stored).block_size);
    std::vector<uint8_t> copy(rb * size_t(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* src = static_cast<const uint8_t*>(t.data) + size_t(r) * rb;
      uint8_t* dst = copy.data() + size_t(r) * rb;
      if (quant::is_repacked(t.type)) quant::unrepack_row(t.type, src, dst, nb);
      else std::memcpy(dst, src, rb);
    }
    if (want != stored) quant::repack_rows_in_place(stored, copy.data(), rows, rb, nb);
    t.type = want;
    t.data = copy.data();
    t.n_bytes = copy.size();
    ws->owned_.push_back(std::move(copy));
  }
  return ws;
}

Weight WeightStore::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  Weight w = matrix_opt(name, n_in, n_out);
  BRISK_CHECK(!w.empty(), "missing tensor ", name, " (expected shape {", n_in, ", ", n_out, "})");
  return w;
}

const float* WeightStore::vector_opt(const std::string& name, int64_t n) {
  if (auto it = vectors_.find(name); it != vectors_.end()) {
    BRISK_CHECK(int64_t(it->second.size()) == n, "tensor ", name, " has ", it->second.size(),
                " elements, expected ", n);
    return it->second.data();
  }
  const StoredTensor* t = find(name);
  if (!t) return nullptr;
  int64_t count = 1;
  for (int64_t d : t->ne) count *= d;
  BRISK_CHECK(count == n, "tensor ", name, " has shape ", shape_str(t->ne), ", expected ", n, " elements");
  const auto rb = quant_row_bytes(t->type, uint64_t(n));
  BRISK_CHECK(rb && *rb <= t->n_bytes, "tensor ", name, ": data does not hold ", n, " elements");
  std::vector<float> v(static_cast<size_t>(n));
  cpu::row_to_f32(t->type, t->data, v.data(), n);
  auto& stored = vectors_[name] = std::move(v);
  return stored.data();
}

const float* WeightStore::vector(const std::string& name, int64_t n) {
  const float* v = vector_opt(name, n);
  BRISK_CHECK(v != nullptr, "missing tensor ", name, " (expected ", n, " elements)");
  return v;
}

void WeightStore::put_view(StoredTensor t) {
  vectors_.erase(t.name);
  std::string name = t.name;
  tensors_[name] = std::move(t);
}

void WeightStore::put_owned(StoredTensor t, std::vector<uint8_t> bytes) {
  t.data = bytes.data();
  t.n_bytes = bytes.size();
  owned_.push_back(std::move(bytes));
  put_view(std::move(t));
}

uint64_t WeightStore::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.n_bytes;
  return n;
}

uint64_t WeightStore::total_elements() const {
  uint64_t n = 0;
  for (const auto& [name, t] : tensors_) {
    uint64_t c = 1;
    for (int64_t d : t.ne) c *= uint64_t(d);
    n += c;
  }
  return n;
}

}  // namespace brisk
