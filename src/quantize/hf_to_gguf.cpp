#include "quantize/hf_to_gguf.h"

#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "formats/tokenizer_to_gguf.h"
#include "models/config.h"
#include "models/name_map.h"
#include "models/registry.h"
#include "models/rope_scaling.h"

namespace brisk {
namespace {

namespace fs = std::filesystem;

// HF q/k rows of one head are [first halves..., second halves...] (rotate_half); GGUF's are
// interleaved pairs. rows: [n_head * head_dim, n_in] -> same shape, rows reordered per head
// (n_in = 1 for a bias).
std::vector<float> permute_rows(const std::vector<float>& w, int64_t n_head, int64_t n_rows, int64_t n_in,
                                const std::string& name) {
  BRISK_CHECK(n_head > 0 && n_rows % (2 * n_head) == 0, "convert: ", name, ": ", n_rows,
              " rows do not split into ", n_head, " heads of pairs");
  const int64_t hd = n_rows / n_head, half = hd / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t src = h * hd + j * half + i, dst = h * hd + i * 2 + j;
        std::copy_n(w.begin() + src * n_in, n_in, out.begin() + dst * n_in);
      }
  return out;
}

// llama.cpp's llama3 rope factors: 1 for short wavelengths, `factor` for long, smooth between.
std::vector<float> llama3_rope_factors(const ModelConfig& c, int32_t dim) {
  const auto& s = c.rope_scaling;
  const float old_ctx = float(s.original_ctx > 0 ? s.original_ctx : 8192);
  const float low_wavelen = old_ctx / s.low_freq_factor, high_wavelen = old_ctx / s.high_freq_factor;
  std::vector<float> f;
  for (int32_t i = 0; i < dim; i += 2) {
    const double freq = 1.0 / std::pow(double(c.rope_theta), double(i) / double(dim));
    const double wavelen = 2.0 * M_PI / freq;
    if (wavelen < high_wavelen) f.push_back(1.0f);
    else if (wavelen > low_wavelen) f.push_back(s.factor);
    else {
      const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f.push_back(float(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return f;
}

std::string known_conversions() {
  std::string s;
  for (const ArchEntry* e : arch_registry())
    if (!e->convert.arch.empty()) s += (s.empty() ? "" : ", ") + e->name;
  return s;
}

// "blk.N.ffn_gate_exps.E.weight" (one expert's slice, models/name_map.cpp) -> the stacked
// tensor's name "blk.N.ffn_gate_exps.weight" and E; false for other names.
bool expert_slice(const std::string& name, std::string* stacked, int64_t* expert) {
  const size_t tail = name.rfind(".weight");
  if (tail == std::string::npos || tail + 7 != name.size()) return false;
  const size_t dot = name.rfind('.', tail - 1);
  if (dot == std::string::npos || dot < 5 || name.compare(dot - 5, 5, "_exps") != 0) return false;
  const std::string e = name.substr(dot + 1, tail - dot - 1);
  if (e.empty() || e.size() > 6 || e.find_first_not_of("0123456789") != std::string::npos) return false;
  *stacked = name.substr(0, dot) + ".weight";
  *expert = std::stoll(e);
  return true;
}

// The rotary frequencies a config gives (with GGUF's rope_freqs factors when written).
RopeTable rope_of(const ModelConfig& c, const std::vector<float>& factors) {
  return rope_table_build({.n_rot = c.n_rot, .theta = c.rope_theta, .n_ctx_train = c.n_ctx_train,
                           .scaling = c.rope_scaling, .freq_factors = factors, .neox = true});
}

// The written file read back as the loader reads it must give the same model: a setting the
// GGUF keys cannot hold is an error naming it.
void check_round_trip(const ArchEntry& e, const ModelConfig& hf, const std::string& path,
                      const std::vector<float>& rope_factors) {
  const gguf::File f = gguf::File::open(path, MappedFile::Mode::mmap);
  const ArchEntry* back = arch_find_gguf(f.architecture());
  BRISK_CHECK(back != nullptr, "convert: ", path, ": architecture '", f.architecture(), "' is not readable back");
  ModelConfig g;
  g.rope_neox = back->gguf_rope_neox;
  g.from_gguf = true;
  config_fill_from_gguf(g, f);
  g.tie_embeddings = hf.tie_embeddings;
  if (back->sanitize) back->sanitize(g);
  g.finalize();
  auto same = [&](const char* what, double a, double b) {
    BRISK_CHECK(a == b || std::fabs(a - b) <= 1e-5 * std::fabs(a), "convert: ", e.name, " ", what, " ", a,
                " reads back from GGUF as ", b, " (no GGUF key holds it for ", e.convert.arch, ")");
  };
  same("vocabulary size", hf.n_vocab, g.n_vocab);
  same("hidden size", hf.n_embd, g.n_embd);
  same("layers", hf.n_layer, g.n_layer);
  same("heads", hf.n_head, g.n_head);
  same("KV heads", hf.n_head_kv, g.n_head_kv);
  same("head_dim", hf.head_dim, g.head_dim);
  same("MLP size", hf.n_ff, g.n_ff);
  same("context length", hf.n_ctx_train, g.n_ctx_train);
  same("norm epsilon", hf.rms_eps, g.rms_eps);
  same("sliding window", hf.sliding_window, g.sliding_window);
  same("attention soft-cap", hf.attn_softcap, g.attn_softcap);
  same("logit soft-cap", hf.final_softcap, g.final_softcap);
  same("experts", hf.n_expert, g.n_expert);
  same("experts per token", hf.n_expert_used, g.n_expert_used);
  same("expert MLP size", hf.n_ff_exp, g.n_ff_exp);
  same("expert weight renormalization", hf.norm_topk_prob, g.norm_topk_prob);
  same("activation", double(int(hf.act)), double(int(g.act)));
  same("attention scale", hf.attn_scale, g.attn_scale);
  same("rotary dims", hf.n_rot, g.n_rot);
  same("KV-shared layers", hf.n_kv_shared_layers, g.n_kv_shared_layers);
  same("per-layer embedding size", hf.n_embd_per_layer, g.n_embd_per_layer);
  for (int il = 0; il < hf.n_layer; ++il) {
    same("layer head_dim", hf.head_dim_of(il), g.head_dim_of(il));
    same("layer KV heads", hf.n_head_kv_of(il), g.n_head_kv_of(il));
    same("layer MLP size", hf.n_ff_of(il), g.n_ff_of(il));
    same("layer sliding window", hf.sliding(il) ? hf.sliding_window : 0, g.sliding(il) ? g.sliding_window : 0);
  }
  same("sliding-window rope base", hf.rope_theta_swa > 0 ? hf.rope_theta_swa : hf.rope_theta,
       g.rope_theta_swa > 0 ? g.rope_theta_swa : g.rope_theta);
  if (e.convert.write_metadata) return;  // its rope is checked where it is written
  const RopeTable a = rope_of(hf, {}), b = rope_of(g, rope_factors);
  same("rope attention factor", a.attn_factor, b.attn_factor);
  for (size_t i = 0; i < a.inv_freq.size(); ++i) same("rope frequency", a.inv_freq[i], b.inv_freq[i]);
}

// A sentence-transformers folder's pipeline as llama.cpp's converter writes it: the pooling as
// {arch}.pooling_type (1 mean, 2 CLS, 3 last token; -1 without modules.json) and the Dense
// modules 2_Dense / 3_Dense (no bias, identity activation: what llama.cpp applies) as tensors
// dense_2.weight / dense_3.weight with {arch}.dense_N_feat_in / _feat_out. What GGUF cannot hold
// (max pooling, other Dense modules) is refused rather than written as a different model.
struct StPipeline {
  int32_t pooling_type = -1;
  std::vector<std::pair<std::string, ConvertTensor>> dense;  // "dense_2", its [out, in] weight
};

StPipeline st_pipeline(const fs::path& folder) {
  StPipeline out;
  const fs::path modules = folder / "modules.json";
  if (!fs::exists(modules)) return out;
  const nlohmann::json m = read_json_file(modules.string());
  BRISK_CHECK(m.is_array(), modules.string(), ": not a list of modules");
  for (const nlohmann::json& mod : m) {
    const std::string kind = mod.is_object() ? mod.value("type", std::string()) : std::string();
    const std::string path = mod.is_object() ? mod.value("path", std::string()) : std::string();
    const fs::path cfg_path = folder / path / "config.json";
    if (kind.ends_with(".Dense")) {
      BRISK_CHECK(path == "2_Dense" || path == "3_Dense", "convert: ", modules.string(), ": Dense module '", path,
                  "' (GGUF holds 2_Dense and 3_Dense, as llama.cpp names them)");
      const nlohmann::json c = read_json_file(cfg_path.string());
      BRISK_CHECK(c.is_object() && !c.value("bias", true) &&
                      c.value("activation_function", std::string()).ends_with(".Identity"),
                  "convert: ", cfg_path.string(), ": a Dense layer with a bias or an activation (GGUF holds "
                  "linear layers only)");
      const auto st = safetensors::Checkpoint::open((folder / path).string(), MappedFile::Mode::mmap);
      const safetensors::TensorInfo* w = nullptr;
      for (const auto& t : st.tensors())
        if (t.name == "linear.weight") w = &t;
      BRISK_CHECK(w && w->shape.size() == 2, "convert: ", (folder / path).string(), ": no linear.weight matrix");
      out.dense.push_back({path == "2_Dense" ? "dense_2" : "dense_3",
                           ConvertTensor{.ne = {uint64_t(w->shape[1]), uint64_t(w->shape[0])}, .f = safetensors::to_f32(*w)}});
      continue;
    }
    if (!kind.ends_with(".Pooling")) continue;
    const nlohmann::json c = read_json_file(cfg_path.string());
    // The flags, or sentence-transformers 6's one string.
    const std::string mode = c.is_object() && c.contains("pooling_mode") && c["pooling_mode"].is_string()
                                 ? c["pooling_mode"].get<std::string>() : std::string();
    auto on = [&](const char* k, const char* name) { return mode == name || (c.is_object() && c.value(k, false)); };
    if (on("pooling_mode_mean_tokens", "mean")) out.pooling_type = 1;
    else if (on("pooling_mode_cls_token", "cls")) out.pooling_type = 2;
    else if (on("pooling_mode_lasttoken", "lasttoken")) out.pooling_type = 3;
    else fail("convert: ", cfg_path.string(), ": a pooling mode GGUF cannot say (mean, CLS and last token can)");
  }
  return out;
}

}  // namespace

void hf_to_gguf_f32(const std::string& folder, const std::string& out_path) {
  const std::string cfg_path = (fs::path(folder) / "config.json").string();
  const nlohmann::json cfg = read_json_file(cfg_path);
  BRISK_CHECK(cfg.is_object(), cfg_path, ": top level is not an object");
  const ArchEntry* e = arch_find_hf_config(cfg);
  BRISK_CHECK(e != nullptr, cfg_path, ": architecture (model_type '", cfg.value("model_type", std::string()),
              "') is not supported (convertible: ", known_conversions(), ")");
  BRISK_CHECK(!e->convert.arch.empty(), "convert: ", e->name, " checkpoints cannot be written as GGUF yet ",
              "(convertible: ", known_conversions(), ")");
  const GgufConversion& conv = e->convert;
  if (conv.layout == GgufLayout::encoder_decoder) return hf_to_gguf_encoder_decoder_f32(folder, out_path, *e);
  const auto name_map = e->hf_name_map ? e->hf_name_map : &hf_to_gguf_name;

  ModelConfig c;
  config_fill_from_hf(c, arch_hf_config_with_defaults(*e, cfg));
  const auto ckpt = safetensors::Checkpoint::open(folder, MappedFile::Mode::mmap);
  bool has_output = false;
  for (const auto& t : ckpt.tensors()) {
    const std::string name = name_map(t.name);
    if (name == "token_embd.weight" && c.n_vocab == 0 && t.shape.size() == 2) c.n_vocab = int32_t(t.shape[0]);
    has_output = has_output || name == "output.weight";
  }
  c.tie_embeddings = !has_output;
  c.arch = e->name;
  const StPipeline st = st_pipeline(folder);
  c.pooling_type = st.pooling_type;
  if (e->sanitize) e->sanitize(c);
  c.finalize();
  if (conv.check) conv.check(c);

  // llama3 rope scaling goes into the file as llama.cpp writes it: per-pair factors.
  std::vector<float> rope_factors;
  if (c.rope_scaling.type == "llama3") rope_factors = llama3_rope_factors(c, c.n_rot);
  // Every tensor as float32 under its GGUF name, then the architecture's own steps.
  ConvertTensors tensors;
  if (!rope_factors.empty() && !conv.write_metadata)
    tensors["rope_freqs.weight"] = {.ne = {uint64_t(rope_factors.size())}, .f = rope_factors};
  std::map<std::string, std::map<int64_t, ConvertTensor>> experts;  // stacked name -> expert -> slice
  for (const auto& t : ckpt.tensors()) {
    const std::string name = name_map(t.name);
    if (name.empty()) continue;
    BRISK_CHECK(t.shape.size() <= 3, "convert: ", t.name, " has ", t.shape.size(), " dims");
    std::vector<float> f = safetensors::to_f32(t);
    std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());  // GGUF order: innermost first
    if (ne.empty()) ne = {1};
    // Adjacent-pair rope in the file (e.g. llama): q/k rows (and biases) permuted per head.
    const bool q = name.ends_with("attn_q.weight") || name.ends_with("attn_q.bias");
    const bool k = name.ends_with("attn_k.weight") || name.ends_with("attn_k.bias");
    if (!e->gguf_rope_neox && (q || k))
      f = permute_rows(f, q ? c.n_head : c.n_head_kv, int64_t(t.shape[0]), t.shape.size() == 2 ? int64_t(t.shape[1]) : 1,
                       t.name);
    if (conv.norm_shift != 0.0f && name.ends_with("norm.weight"))
      for (float& v : f) v += conv.norm_shift;
    std::string stacked;
    int64_t expert = 0;
    if (t.shape.size() == 2 && expert_slice(name, &stacked, &expert)) {
      BRISK_CHECK(experts[stacked].emplace(expert, ConvertTensor{ne, std::move(f)}).second, "convert: ", t.name,
                  ": expert ", expert, " given twice");
      continue;
    }
    BRISK_CHECK(tensors.emplace(name, ConvertTensor{std::move(ne), std::move(f)}).second, "convert: ", t.name,
                ": its GGUF name ", name, " is given twice");
  }
  // One 3-D tensor per layer and projection, experts in id order: ne {n_in, n_out, n_expert}.
  for (auto& [name, slices] : experts) {
    const std::vector<uint64_t> ne = slices.begin()->second.ne;
    std::vector<float> all;
    int64_t next = 0;
    for (auto& [id, s] : slices) {
      BRISK_CHECK(id == next++ && s.ne == ne, "convert: ", name, ": experts are not 0..", slices.size() - 1,
                  " of one shape");
      all.insert(all.end(), s.f.begin(), s.f.end());
      s.f = {};
    }
    tensors[name] = {.ne = {ne[0], ne[1], uint64_t(slices.size())}, .f = std::move(all)};
  }
  experts.clear();
  if (conv.tensors) conv.tensors(c, tensors);

  gguf::Writer w;
  w.set("general.architecture", gguf::Value::from_string(conv.arch));
  w.set("general.name", gguf::Value::from_string(fs::path(folder).filename().string()));
  ModelConfig written = c;
  if (!rope_factors.empty()) written.rope_scaling = RopeScaling{};
  if (conv.write_metadata) {
    conv.write_metadata(c, w, &rope_factors);  // may add rope_freqs.weight over rope_factors
  } else {
    config_write_gguf(written, conv.arch, w);
  }
  if (conv.keys) conv.keys(written, conv.arch, w);
  for (const auto& [name, t] : st.dense) {
    w.set(conv.arch + "." + name + "_feat_in", gguf::Value::from_u32(uint32_t(t.ne[0])));
    w.set(conv.arch + "." + name + "_feat_out", gguf::Value::from_u32(uint32_t(t.ne[1])));
    BRISK_CHECK(tensors.emplace(name + ".weight", t).second, "convert: ", name, ".weight is given twice");
  }
  w.set("general.file_type", gguf::Value::from_u32(0));
  if (const fs::path tj = fs::path(folder) / "tokenizer.json"; fs::exists(tj)) {
    // WordPiece and Unigram tokenizers have one GGUF form each (bert, t5); a BPE one is written
    // in the architecture's form: gpt2, or gemma4 unless it is byte-level. Other architectures
    // (bert, t5 forms) leave a BPE tokenizer out.
    const std::string type = tokenizer_json_model_type(folder);
    bool write = type != "BPE" || conv.tokenizer == "gpt2";
    if (type == "BPE" && conv.tokenizer == "gemma4") {
      const nlohmann::json t = read_json_file(tj.string());
      write = !(t.is_object() && t.contains("decoder") && t["decoder"].is_object() &&
                t["decoder"].value("type", "") == "ByteLevel");
    }
    if (write) tokenizer_to_gguf({.folder = folder, .pre = "", .n_vocab = c.n_vocab, .model = conv.tokenizer}, w);
  }

  for (auto& [name, t] : tensors) {
    BRISK_CHECK(t.ne.size() <= 3, "convert: ", name, " has ", t.ne.size(), " dims");
    w.add_tensor(name, QuantType::F32, t.ne, t.f.data(), t.f.size() * 4);
  }
  w.write(out_path);
  try {
    check_round_trip(*e, c, out_path, rope_factors);
  } catch (...) {
    fs::remove(out_path);
    throw;
  }
}

}  // namespace brisk
