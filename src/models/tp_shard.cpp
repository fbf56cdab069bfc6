#include "models/tp_shard.h"

#include <cstring>

#include "core/error.h"
#include "quant/repack.h"

namespace brisk {

namespace {

bool tp_dense_arch(const std::string& arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3";
}

// Qwen3-MoE (HF model_type or GGUF name): experts split by their MLP rows.
bool tp_moe_arch(const std::string& arch) { return arch == "qwen3moe" || arch == "qwen3_moe"; }

// How a tensor of a dense decoder layer is split: by its output rows, its input columns, only
// on rank 0 (a row-parallel matmul's bias), or not at all.
// Expert stacks (3-D {n_in, rows, n_expert}) split each expert's rows (expert_rows; the fused
// gate_up stack: its gate rows and its up rows, expert_rows_fused); their down stack splits
// columns like a matrix.
enum class TpSplitKind { replicated, rows, cols, rank0, expert_rows, expert_rows_fused };

struct TpTensorSplit {
  TpSplitKind kind = TpSplitKind::replicated;
  int64_t whole = 0;  // rows / columns / elements of the unsplit tensor along the split
};

// "blk.<il>.<suffix>" -> il and suffix; false for tensors outside the layer stack.
bool tp_layer_tensor(const std::string& name, int* il, std::string* suffix) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos) return false;
  int v = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    v = v * 10 + (name[i] - '0');
    if (v > 1000000) return false;
  }
  *il = v;
  *suffix = name.substr(dot + 1);
  return true;
}

TpTensorSplit tp_split_of(const ModelConfig& cfg, const std::string& name) {
  int il = 0;
  std::string s;
  if (!tp_layer_tensor(name, &il, &s) || il >= cfg.n_layer) return {};
  const int64_t q = cfg.q_width_of(il), kv = cfg.kv_width_of(il), ff = cfg.n_ff_of(il);
  if (s == "attn_q.weight" || s == "attn_q.bias") return {TpSplitKind::rows, q};
  if (s == "attn_k.weight" || s == "attn_k.bias" || s == "attn_v.weight" || s == "attn_v.bias")
    return {TpSplitKind::rows, kv};
  if (s == "ffn_gate.weight" || s == "ffn_up.weight") return {TpSplitKind::rows, ff};
  if (s == "attn_output.weight") return {TpSplitKind::cols, q};
  if (s == "ffn_down.weight") return {TpSplitKind::cols, ff};
  if (s == "attn_output.bias" || s == "ffn_down.bias") return {TpSplitKind::rank0, 0};
  // Experts: 3-D stacks, or one 2-D matrix per expert (ffn_gate_exps.<e>.weight).
  const int64_t fe = cfg.n_ff_exp;
  const auto expert = [&](const char* kind) {
    const std::string p = std::string("ffn_") + kind + "_exps.";
    return s.rfind(p, 0) == 0 && s.size() > p.size() + 6 && s.compare(s.size() - 7, 7, ".weight") == 0;
  };
  if (s == "ffn_gate_exps.weight" || s == "ffn_up_exps.weight") return {TpSplitKind::expert_rows, fe};
  if (s == "ffn_gate_up_exps.weight") return {TpSplitKind::expert_rows_fused, fe};
  if (s == "ffn_down_exps.weight") return {TpSplitKind::cols, fe};
  if (expert("gate") || expert("up")) return {TpSplitKind::rows, fe};
  if (expert("down")) return {TpSplitKind::cols, fe};
  return {};
}

// Rows [first, first + count) of every expert of a stack t {n_in, rows, n_expert} (rows = f, or
// 2 f for a fused gate_up stack, whose up rows [f + first, f + first + count) follow its gate
// rows), copied into *bytes.
StoredTensor tp_slice_expert_rows(const StoredTensor& t, bool fused, int64_t f, int64_t first, int64_t count,
                                  std::vector<uint8_t>* bytes) {
  const auto rb = quant_row_bytes(t.type, uint64_t(t.ne[0]));
  const int64_t rows = t.ne[1], n_expert = t.ne[2];
  BRISK_CHECK(rb && *rb * uint64_t(rows) * uint64_t(n_expert) <= t.n_bytes, "tensor ", t.name,
              ": data is shorter than its shape");
  const int64_t halves = fused ? 2 : 1;
  bytes->assign(size_t(*rb) * size_t(halves * count * n_expert), 0);
  const auto* src = static_cast<const uint8_t*>(t.data);
  uint8_t* dst = bytes->data();
  for (int64_t e = 0; e < n_expert; ++e)
    for (int64_t h = 0; h < halves; ++h) {
      const size_t from = size_t(*rb) * size_t(e * rows + h * f + first), n = size_t(*rb) * size_t(count);
      std::memcpy(dst, src + from, n);
      dst += n;
    }
  StoredTensor s = t;
  s.ne = {t.ne[0], halves * count, n_expert};
  s.data = bytes->data();
  s.n_bytes = bytes->size();
  s.writable = true;
  return s;
}

std::string tp_shape_str(const std::vector<int64_t>& ne) {
  std::string out = "{";
  for (size_t i = 0; i < ne.size(); ++i) out += (i ? ", " : "") + std::to_string(ne[i]);
  return out + "}";
}

}  // namespace

void tp_check_split(const ModelConfig& cfg, int32_t world) {
  BRISK_CHECK(world >= 1 && world <= 1024, "tensor parallelism: ", world, " ranks (expected 1 to 1024)");
  const bool moe = tp_moe_arch(cfg.arch);
  BRISK_CHECK(tp_dense_arch(cfg.arch) || moe, "tensor parallelism: architecture ", cfg.arch,
              " is not supported (the dense decoders llama, mistral, qwen2 and qwen3 are, and qwen3moe)");
  BRISK_CHECK(moe || cfg.n_expert == 0, "tensor parallelism: ", cfg.arch, " has ", cfg.n_expert,
              " experts per layer; only qwen3moe's mixtures of experts are split");
  BRISK_CHECK(cfg.n_ff_shexp == 0, "tensor parallelism: ", cfg.arch, " has a shared expert, which is not split yet");
  if (world == 1) return;
  BRISK_CHECK(!moe || cfg.n_ff_exp % world == 0, "tensor parallelism: experts of ", cfg.n_ff_exp,
              " MLP rows do not split over ", world, " ranks");
  BRISK_CHECK(cfg.n_head % world == 0, "tensor parallelism: ", cfg.n_head, " attention heads do not split over ",
              world, " ranks");
  for (int il = 0; il < cfg.n_layer; ++il) {
    const int32_t hkv = cfg.n_head_kv_of(il), ff = cfg.n_ff_of(il);
    const std::string where = cfg.layer_n_head_kv.empty() && cfg.layer_n_ff.empty() ? "" : str_cat(" (layer ", il, ")");
    BRISK_CHECK(hkv >= world, "tensor parallelism: ", world, " ranks need at least ", world, " KV heads, the model has ",
                hkv, where);
    BRISK_CHECK(hkv % world == 0, "tensor parallelism: ", hkv, " KV heads do not split over ", world, " ranks", where);
    // (A mixture-of-experts config's n_ff may be a buffer size, not a layer's: its dense MLPs, if
    // any, are checked by their tensors' shapes.)
    BRISK_CHECK(moe || ff % world == 0, "tensor parallelism: an MLP of ", ff, " rows does not split over ", world,
                " ranks", where);
  }
}

ModelConfig tp_shard_config(const ModelConfig& cfg, int32_t world) {
  ModelConfig c = cfg;
  c.n_head = cfg.n_head / world;
  c.n_head_kv = cfg.n_head_kv / world;
  c.n_ff = cfg.n_ff / world;
  c.n_ff_exp = cfg.n_ff_exp / world;
  for (int32_t& v : c.layer_n_head_kv) v /= world;
  for (int32_t& v : c.layer_n_ff) v /= world;
  return c;
}

StoredTensor tp_slice_rows(const StoredTensor& t, int64_t first, int64_t count) {
  // A repacked layout (quant/repack.h) rearranges bytes within each row: whole rows slice alike.
  const bool vec = t.ne.size() == 1;
  BRISK_CHECK(vec || t.ne.size() == 2, "tensor ", t.name, " has shape ", tp_shape_str(t.ne), ": not 1-D or 2-D");
  const int64_t whole = vec ? t.ne[0] : t.ne[1];
  BRISK_CHECK(first >= 0 && count >= 0 && first + count <= whole, "tensor ", t.name, ": rows [", first, ", ",
              first + count, ") outside its ", whole);
  StoredTensor s = t;
  if (vec) {
    const auto off = quant_row_bytes(t.type, uint64_t(first));
    const auto len = quant_row_bytes(t.type, uint64_t(count));
    BRISK_CHECK(off && len && *off + *len <= t.n_bytes, "tensor ", t.name, ": elements [", first, ", ", first + count,
                ") do not fall on ", quant_type_info(t.type).name, " blocks");
    s.ne = {count};
    s.data = static_cast<const uint8_t*>(t.data) + *off;
    s.n_bytes = size_t(*len);
  } else {
    const auto rb = quant_row_bytes(t.type, uint64_t(t.ne[0]));
    BRISK_CHECK(rb && *rb * uint64_t(whole) <= t.n_bytes, "tensor ", t.name, ": data is shorter than its shape");
    s.ne = {t.ne[0], count};
    s.data = static_cast<const uint8_t*>(t.data) + size_t(*rb) * size_t(first);
    s.n_bytes = size_t(*rb) * size_t(count);
  }
  s.writable = false;  // the model's bytes: a backend's layout gets a converted copy
  return s;
}

StoredTensor tp_slice_cols(const StoredTensor& t, int64_t first, int64_t count, std::vector<uint8_t>* bytes) {
  BRISK_CHECK(t.ne.size() == 2, "tensor ", t.name, " has shape ", tp_shape_str(t.ne), ": not 2-D");
  BRISK_CHECK(first >= 0 && count >= 0 && first + count <= t.ne[0], "tensor ", t.name, ": columns [", first, ", ",
              first + count, ") outside its ", t.ne[0]);
  // Columns are cut from rows in the stored format (a repacked row is converted back first).
  const QuantType stored = quant::stored_type(t.type);
  const QuantTypeInfo& info = quant_type_info(stored);
  const auto rb = quant_row_bytes(stored, uint64_t(t.ne[0]));
  const auto off = quant_row_bytes(stored, uint64_t(first));
  const auto len = quant_row_bytes(stored, uint64_t(count));
  BRISK_CHECK(off && len, "tensor ", t.name, " (", info.name, ", blocks of ", info.block_size, "): columns [", first,
              ", ", first + count, ") do not fall on block boundaries; use fewer ranks or another quant type");
  BRISK_CHECK(rb && *rb * uint64_t(t.ne[1]) <= t.n_bytes, "tensor ", t.name, ": data is shorter than its shape");
  bytes->assign(size_t(*len) * size_t(t.ne[1]), 0);
  const auto* src = static_cast<const uint8_t*>(t.data);
  std::vector<uint8_t> row(quant::is_repacked(t.type) ? size_t(*rb) : 0);
  for (int64_t r = 0; r < t.ne[1]; ++r) {
    const uint8_t* in = src + size_t(r) * size_t(*rb);
    if (!row.empty()) {
      quant::unrepack_row(t.type, in, row.data(), t.ne[0] / int64_t(info.block_size));
      in = row.data();
    }
    std::memcpy(bytes->data() + size_t(r) * size_t(*len), in + size_t(*off), size_t(*len));
  }
  StoredTensor s = t;
  s.type = stored;
  s.ne = {count, t.ne[1]};
  s.data = bytes->data();
  s.n_bytes = bytes->size();
  s.writable = true;  // owned by the shard
  return s;
}

std::unique_ptr<WeightStore> tp_shard_weights(const WeightStore& full, const ModelConfig& cfg, int32_t rank,
                                              int32_t world) {
  tp_check_split(cfg, world);
  BRISK_CHECK(rank >= 0 && rank < world, "tensor parallelism: rank ", rank, " outside [0, ", world, ")");
  auto ws = std::make_unique<WeightStore>();
  for (const auto& [name, t] : full.tensors()) {
    const TpTensorSplit sp = tp_split_of(cfg, name);
    if (world == 1 || sp.kind == TpSplitKind::replicated) {
      StoredTensor v = t;
      v.writable = false;
      ws->put_view(std::move(v));
      continue;
    }
    if (sp.kind == TpSplitKind::rank0) {
      if (rank == 0) {
        StoredTensor v = t;
        v.writable = false;
        ws->put_view(std::move(v));
      } else {  // zeros of the same shape, in F32: added once over the group
        int64_t n = 1;
        for (int64_t d : t.ne) n *= d;
        StoredTensor z{.name = name, .type = QuantType::F32, .ne = t.ne, .writable = true};
        ws->put_owned(std::move(z), std::vector<uint8_t>(size_t(n) * sizeof(float), 0));
      }
      continue;
    }
    const bool stack = sp.kind == TpSplitKind::expert_rows || sp.kind == TpSplitKind::expert_rows_fused;
    const int64_t along = sp.kind == TpSplitKind::cols ? t.ne[0]
                          : stack                      ? (t.ne.size() == 3 ? t.ne[1] : -1)
                          : t.ne.size() == 1           ? t.ne[0]
                          : t.ne.size() == 2           ? t.ne[1]
                                                       : -1;
    const int64_t whole = sp.kind == TpSplitKind::expert_rows_fused ? 2 * sp.whole : sp.whole;
    BRISK_CHECK(along == whole, "tensor ", name, " has shape ", tp_shape_str(t.ne), ", expected ", whole,
                sp.kind == TpSplitKind::cols ? " columns" : " rows");
    BRISK_CHECK(sp.whole % world == 0, "tensor parallelism: tensor ", name, ": ", sp.whole, " ",
                sp.kind == TpSplitKind::cols ? "columns" : "rows", " do not split over ", world, " ranks");
    const int64_t part = sp.whole / world;
    if (sp.kind == TpSplitKind::rows) {
      ws->put_view(tp_slice_rows(t, int64_t(rank) * part, part));
    } else if (stack) {
      std::vector<uint8_t> bytes;
      StoredTensor s = tp_slice_expert_rows(t, sp.kind == TpSplitKind::expert_rows_fused, sp.whole,
                                            int64_t(rank) * part, part, &bytes);
      ws->put_owned(std::move(s), std::move(bytes));
    } else {
      // A 3-D down stack {n_ff_exp, n_embd, n_expert} cuts its columns like a matrix of
      // n_embd x n_expert rows.
      StoredTensor flat = t;
      int64_t rows = 1;
      for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
      flat.ne = {t.ne[0], rows};
      std::vector<uint8_t> bytes;
      StoredTensor s = tp_slice_cols(flat, int64_t(rank) * part, part, &bytes);
      s.ne = t.ne;
      s.ne[0] = part;
      ws->put_owned(std::move(s), std::move(bytes));
    }
  }
  return ws;
}

}  // namespace brisk
