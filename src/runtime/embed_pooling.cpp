#include "runtime/embed_pooling.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"

namespace brisk {

namespace fs = std::filesystem;

namespace {

bool pooling_json_bool(const nlohmann::json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return false;
  BRISK_CHECK(it->is_boolean(), file, ": '", key, "' is not a boolean");
  return it->get<bool>();
}

// 1_Pooling/config.json: exactly one of the pooling modes this engine runs.
void read_pooling(PoolingConfig& c, const std::string& file) {
  const nlohmann::json j = read_json_file(file);
  BRISK_CHECK(j.is_object(), file, ": not a JSON object");
  std::vector<PoolingMode> modes;
  if (pooling_json_bool(j, "pooling_mode_cls_token", file)) modes.push_back(PoolingMode::cls);
  if (pooling_json_bool(j, "pooling_mode_mean_tokens", file)) modes.push_back(PoolingMode::mean);
  if (pooling_json_bool(j, "pooling_mode_max_tokens", file)) modes.push_back(PoolingMode::max);
  if (pooling_json_bool(j, "pooling_mode_lasttoken", file)) modes.push_back(PoolingMode::last);
  for (const char* unsupported : {"pooling_mode_mean_sqrt_len_tokens", "pooling_mode_weightedmean_tokens"})
    BRISK_CHECK(!pooling_json_bool(j, unsupported, file), file, ": '", unsupported, "' is not supported");
  // sentence-transformers 6 writes "pooling_mode": "mean" (or a list of names) instead of flags,
  // and "include_prompt" (false: prompt tokens left out of the pool, not done here).
  if (auto it = j.find("pooling_mode"); it != j.end() && !it->is_null()) {
    BRISK_CHECK(it->is_string() || it->is_array(), file, ": 'pooling_mode' must be a string or a list of strings");
    for (const nlohmann::json& m : it->is_string() ? nlohmann::json::array({*it}) : *it) {
      BRISK_CHECK(m.is_string(), file, ": 'pooling_mode' must be a string or a list of strings");
      const std::string name = m.get<std::string>();
      if (name == "cls" || name == "cls_token") modes.push_back(PoolingMode::cls);
      else if (name == "mean" || name == "mean_tokens") modes.push_back(PoolingMode::mean);
      else if (name == "max" || name == "max_tokens") modes.push_back(PoolingMode::max);
      else if (name == "lasttoken" || name == "last") modes.push_back(PoolingMode::last);
      else fail(file, ": pooling_mode '", name, "' is not supported (cls, mean, max, lasttoken)");
    }
  }
  if (auto it = j.find("include_prompt"); it != j.end() && !it->is_null())
    BRISK_CHECK(it->is_boolean() && it->get<bool>(), file,
                ": 'include_prompt' false (prompt tokens left out of the pooling) is not supported");
  BRISK_CHECK(modes.size() == 1, file, ": ", modes.size(),
              " pooling modes are on; exactly one of cls_token, mean_tokens, max_tokens, lasttoken is supported");
  c.mode = modes[0];
}

DenseLayer read_dense(const fs::path& dir, int32_t n_in_expected) {
  const std::string cfg_file = (dir / "config.json").string();
  const nlohmann::json j = read_json_file(cfg_file);
  BRISK_CHECK(j.is_object() && j.contains("in_features") && j.contains("out_features") &&
                  j["in_features"].is_number_integer() && j["out_features"].is_number_integer(),
              cfg_file, ": in_features and out_features must be integers");
  DenseLayer d;
  d.n_in = j["in_features"].get<int32_t>();
  d.n_out = j["out_features"].get<int32_t>();
  BRISK_CHECK(d.n_in == n_in_expected && d.n_out > 0 && d.n_out <= (1 << 20), cfg_file, ": in_features ", d.n_in,
              " / out_features ", d.n_out, " do not follow the previous module's width ", n_in_expected);
  const std::string act = j.value("activation_function", std::string("torch.nn.modules.linear.Identity"));
  if (act.find("Tanh") != std::string::npos) d.tanh = true;
  else BRISK_CHECK(act.find("Identity") != std::string::npos, cfg_file, ": activation_function '", act,
                   "' is not supported (Identity, Tanh)");
  const fs::path st = dir / "model.safetensors";
  BRISK_CHECK(fs::exists(st), st.string(), " is missing (a Dense layer's weights; pytorch_model.bin is not read)");
  const safetensors::Checkpoint ck = safetensors::Checkpoint::open(st.string(), MappedFile::Mode::read);
  const safetensors::TensorInfo* w = ck.find("linear.weight");
  BRISK_CHECK(w && w->shape.size() == 2 && w->shape[0] == uint64_t(d.n_out) && w->shape[1] == uint64_t(d.n_in),
              st.string(), ": linear.weight must be [", d.n_out, ", ", d.n_in, "]");
  d.w = safetensors::to_f32(*w);
  if (const safetensors::TensorInfo* b = ck.find("linear.bias")) {
    BRISK_CHECK(b->shape.size() == 1 && b->shape[0] == uint64_t(d.n_out), st.string(), ": linear.bias must be [",
                d.n_out, "]");
    d.b = safetensors::to_f32(*b);
  } else {
    BRISK_CHECK(!j.value("bias", true), st.string(), ": linear.bias is missing and ", cfg_file, " says bias");
  }
  return d;
}

}  // namespace

PoolingConfig pooling_config_from_folder(const std::string& dir_s, int32_t n_embd) {
  PoolingConfig c;
  const fs::path dir(dir_s);
  const fs::path modules = dir / "modules.json";
  if (fs::exists(modules)) {
    c.source = modules.string();
    const nlohmann::json j = read_json_file(modules.string());
    BRISK_CHECK(j.is_array(), modules.string(), ": not a JSON array");
    int32_t width = n_embd;
    for (size_t i = 0; i < j.size(); ++i) {
      const nlohmann::json& m = j[i];
      BRISK_CHECK(m.is_object() && m.contains("type") && m["type"].is_string(), modules.string(), ": [", i,
                  "].type is missing");
      const std::string type = m["type"].get<std::string>();
      const std::string path = m.value("path", std::string());
      const std::string kind = type.substr(type.rfind('.') == std::string::npos ? 0 : type.rfind('.') + 1);
      if (kind == "Transformer") continue;
      if (kind == "Pooling") {
        read_pooling(c, (dir / path / "config.json").string());
      } else if (kind == "Dense") {
        c.dense.push_back(read_dense(dir / path, width));
        width = c.dense.back().n_out;
      } else if (kind == "Normalize") {
        c.normalize = true;
      } else {
        fail(modules.string(), ": [", i, "].type '", type, "' is not supported (Transformer, Pooling, Dense, Normalize)");
      }
    }
  }
  const fs::path st_cfg = dir / "config_sentence_transformers.json";
  if (fs::exists(st_cfg)) {
    const nlohmann::json j = read_json_file(st_cfg.string());
    BRISK_CHECK(j.is_object(), st_cfg.string(), ": not a JSON object");
    if (auto it = j.find("prompts"); it != j.end() && !it->is_null()) {
      BRISK_CHECK(it->is_object(), st_cfg.string(), ": 'prompts' is not an object");
      for (auto p = it->begin(); p != it->end(); ++p) {
        BRISK_CHECK(p->is_string(), st_cfg.string(), ": prompts.", p.key(), " is not a string");
        c.prompts[p.key()] = p->get<std::string>();
      }
    }
    if (auto it = j.find("default_prompt_name"); it != j.end() && !it->is_null()) {
      BRISK_CHECK(it->is_string() && c.prompts.count(it->get<std::string>()), st_cfg.string(),
                  ": default_prompt_name names no prompt");
      c.default_prompt = it->get<std::string>();
    }
  }
  const fs::path sb_cfg = dir / "sentence_bert_config.json";
  if (fs::exists(sb_cfg)) {
    const nlohmann::json j = read_json_file(sb_cfg.string());
    if (auto it = j.find("max_seq_length"); j.is_object() && it != j.end() && !it->is_null()) {
      BRISK_CHECK(it->is_number_integer() && it->get<int64_t>() > 0 && it->get<int64_t>() <= (1 << 24),
                  sb_cfg.string(), ": max_seq_length must be a positive integer");
      c.max_seq_length = it->get<int32_t>();
    }
    if (auto it = j.find("do_lower_case"); j.is_object() && it != j.end() && !it->is_null()) {
      BRISK_CHECK(it->is_boolean(), sb_cfg.string(), ": do_lower_case must be true or false");
      c.lower_case = it->get<bool>();
    }
  }
  return c;
}

PoolingConfig pooling_config_from_gguf(int32_t pooling_type, const std::string& key) {
  PoolingConfig c;
  if (pooling_type < 0) return c;
  c.source = key;
  switch (pooling_type) {
    case 0: c.mode = PoolingMode::none; break;
    case 1: c.mode = PoolingMode::mean; break;
    case 2: c.mode = PoolingMode::cls; break;
    case 3: c.mode = PoolingMode::last; break;
    case 4: c.mode = PoolingMode::cls; c.rank = true; break;
    default: fail(key, " = ", pooling_type, " is not supported (0 none, 1 mean, 2 cls, 3 last, 4 rank)");
  }
  // llama.cpp's embeddings are L2-normalised unless asked otherwise.
  c.normalize = c.mode != PoolingMode::none && !c.rank;
  return c;
}

const char* pooling_name(PoolingMode m) {
  switch (m) {
    case PoolingMode::none: return "none";
    case PoolingMode::mean: return "mean";
    case PoolingMode::cls: return "cls";
    case PoolingMode::last: return "last";
    case PoolingMode::max: return "max";
  }
  return "?";
}

PoolingMode pooling_from_name(const std::string& name) {
  for (PoolingMode m : {PoolingMode::none, PoolingMode::mean, PoolingMode::cls, PoolingMode::last, PoolingMode::max})
    if (name == pooling_name(m)) return m;
  fail("pooling '", name, "' is not one of none, mean, cls, last, max");
}

int32_t pooled_dim(const PoolingConfig& c, int32_t n_embd) { return c.dense.empty() ? n_embd : c.dense.back().n_out; }

void l2_normalize(float* v, int64_t n) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(v[i]) * v[i];
  // torch.nn.functional.normalize: x / max(||x||, 1e-12).
  const double inv = 1.0 / std::max(std::sqrt(ss), 1e-12);
  for (int64_t i = 0; i < n; ++i) v[i] = float(v[i] * inv);
}

std::vector<float> pool(const PoolingConfig& c, const float* hidden, int64_t n, int32_t n_embd) {
  BRISK_CHECK(n >= 1, "pool: an input without tokens");
  std::vector<float> rows;  // [r, n_embd]
  int64_t r = 1;
  switch (c.mode) {
    case PoolingMode::none:
      rows.assign(hidden, hidden + n * n_embd);
      r = n;
      break;
    case PoolingMode::cls: rows.assign(hidden, hidden + n_embd); break;
    case PoolingMode::last: rows.assign(hidden + (n - 1) * n_embd, hidden + n * n_embd); break;
    case PoolingMode::mean: {
      std::vector<double> acc(size_t(n_embd), 0.0);
      for (int64_t t = 0; t < n; ++t)
        for (int32_t i = 0; i < n_embd; ++i) acc[size_t(i)] += hidden[t * n_embd + i];
      rows.resize(size_t(n_embd));
      for (int32_t i = 0; i < n_embd; ++i) rows[size_t(i)] = float(acc[size_t(i)] / double(n));
      break;
    }
    case PoolingMode::max: {
      rows.assign(hidden, hidden + n_embd);
      for (int64_t t = 1; t < n; ++t)
        for (int32_t i = 0; i < n_embd; ++i) rows[size_t(i)] = std::max(rows[size_t(i)], hidden[t * n_embd + i]);
      break;
    }
  }
  int32_t width = n_embd;
  for (const DenseLayer& d : c.dense) {
    std::vector<float> out(size_t(r * d.n_out));
    for (int64_t k = 0; k < r; ++k)
      for (int32_t o = 0; o < d.n_out; ++o) {
        double acc = d.b.empty() ? 0.0 : d.b[size_t(o)];
        const float* w = d.w.data() + int64_t(o) * d.n_in;
        const float* x = rows.data() + k * width;
        for (int32_t i = 0; i < d.n_in; ++i) acc += double(w[i]) * x[i];
        out[size_t(k * d.n_out + o)] = d.tanh ? float(std::tanh(acc)) : float(acc);
      }
    rows.swap(out);
    width = d.n_out;
  }
  if (c.normalize)
    for (int64_t k = 0; k < r; ++k) l2_normalize(rows.data() + k * width, width);
  return rows;
}

std::vector<float> truncate_dims(const std::vector<float>& v, int32_t width, int32_t dims, bool normalize) {
  if (dims <= 0 || dims >= width) return v;
  const int64_t r = int64_t(v.size()) / width;
  std::vector<float> out(size_t(r * dims));
  for (int64_t k = 0; k < r; ++k) {
    std::copy(v.begin() + k * width, v.begin() + k * width + dims, out.begin() + k * dims);
    if (normalize) l2_normalize(out.data() + k * dims, dims);
  }
  return out;
}

}  // namespace brisk
