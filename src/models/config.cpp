// The declarative key table: each row names a ModelConfig field, the config.json key(s)
// (dotted paths into nested objects, alternatives separated by '|', first present wins) and
// the GGUF key ("{arch}" is replaced by general.architecture). A field absent from both keeps
// its default; types are checked and a wrong type is an error naming the key.
#include "models/config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <variant>

#include "core/error.h"
#include "formats/gguf.h"

namespace brisk {

namespace {

using Field = std::variant<int32_t ModelConfig::*, float ModelConfig::*, bool ModelConfig::*,
                           std::string ModelConfig::*, int32_t RopeScaling::*, float RopeScaling::*,
                           std::string RopeScaling::*, std::vector<std::string> ModelConfig::*,
                           std::vector<int32_t> ModelConfig::*>;

struct KeyRow {
  Field field;
  const char* hf;    // "" when config.json has no such key
  const char* gguf;  // "" when GGUF has no such key
  // GGUF arrays with one value per layer go here (the field then takes layer 0's value).
  std::vector<int32_t> ModelConfig::*per_layer = nullptr;
};

const KeyRow kKeyTable[] = {
    {&ModelConfig::n_vocab, "vocab_size|text_config.vocab_size", "{arch}.vocab_size"},
    {&ModelConfig::n_embd, "hidden_size|n_embd", "{arch}.embedding_length"},
    {&ModelConfig::n_layer, "num_hidden_layers|n_layer", "{arch}.block_count"},
    {&ModelConfig::n_head, "num_attention_heads|n_head", "{arch}.attention.head_count"},
    {&ModelConfig::n_head_kv, "num_key_value_heads", "{arch}.attention.head_count_kv", &ModelConfig::layer_n_head_kv},
    {&ModelConfig::head_dim, "head_dim", "{arch}.attention.key_length"},
    {&ModelConfig::n_ff, "intermediate_size|n_inner", "{arch}.feed_forward_length", &ModelConfig::layer_n_ff},
    {&ModelConfig::n_ctx_train, "max_position_embeddings|n_positions", "{arch}.context_length"},
    {&ModelConfig::rms_eps, "rms_norm_eps", "{arch}.attention.layer_norm_rms_epsilon"},
    {&ModelConfig::rope_theta,
     "rope_parameters.rope_theta|rope_parameters.full_attention.rope_theta|rope_theta|rotary_emb_base|global_rope_theta",
     "{arch}.rope.freq_base"},
    {&ModelConfig::rope_theta_swa, "rope_parameters.sliding_attention.rope_theta|rope_local_base_freq|local_rope_theta",
     "{arch}.rope.freq_base_swa"},
    {&ModelConfig::swa_pattern, "sliding_window_pattern|_sliding_window_pattern|global_attn_every_n_layers", ""},
    {&ModelConfig::layer_types, "layer_types", ""},
    {&ModelConfig::query_pre_attn_scalar, "query_pre_attn_scalar", ""},
    {&ModelConfig::attn_softcap, "attn_logit_softcapping", "{arch}.attn_logit_softcapping"},
    {&ModelConfig::final_softcap, "final_logit_softcapping", "{arch}.final_logit_softcapping"},
    {&ModelConfig::n_expert, "num_experts|num_local_experts", "{arch}.expert_count"},
    {&ModelConfig::n_expert_used, "num_experts_per_tok|top_k_experts", "{arch}.expert_used_count"},
    {&ModelConfig::n_ff_exp, "moe_intermediate_size", "{arch}.expert_feed_forward_length"},
    {&ModelConfig::norm_topk_prob, "norm_topk_prob", "{arch}.expert_weights_norm"},
    {&ModelConfig::head_dim_full, "global_head_dim", ""},
    {&ModelConfig::head_dim_swa, "", "{arch}.attention.key_length_swa"},
    {&ModelConfig::n_head_kv_full, "num_global_key_value_heads", ""},
    {&ModelConfig::attention_k_eq_v, "attention_k_eq_v", ""},
    {&ModelConfig::partial_rotary_full, "rope_parameters.full_attention.partial_rotary_factor", ""},
    {&ModelConfig::n_rot_swa, "", "{arch}.rope.dimension_count_swa"},
    {&ModelConfig::n_kv_shared_layers, "num_kv_shared_layers", "{arch}.attention.shared_kv_layers"},
    {&ModelConfig::n_embd_per_layer, "hidden_size_per_layer_input", "{arch}.embedding_length_per_layer_input"},
    {&ModelConfig::n_vocab_per_layer, "vocab_size_per_layer_input", ""},
    {&ModelConfig::double_wide_mlp, "use_double_wide_mlp", ""},
    {&ModelConfig::moe_block, "enable_moe_block", ""},
    {&ModelConfig::n_ff_shexp, "shared_expert_intermediate_size", "{arch}.expert_shared_feed_forward_length"},
    {&ModelConfig::linear_conv_kernel, "linear_conv_kernel_dim", "{arch}.ssm.conv_kernel"},
    {&ModelConfig::linear_n_k_head, "linear_num_key_heads", "{arch}.ssm.group_count"},
    {&ModelConfig::linear_n_v_head, "linear_num_value_heads", "{arch}.ssm.time_step_rank"},
    {&ModelConfig::linear_k_head_dim, "linear_key_head_dim", "{arch}.ssm.state_size"},
    {&ModelConfig::linear_v_head_dim, "linear_value_head_dim", ""},
    {&ModelConfig::linear_inner, "", "{arch}.ssm.inner_size"},
    {&ModelConfig::full_attention_interval, "full_attention_interval", "{arch}.full_attention_interval"},
    {&ModelConfig::recurrent_layers, "", "{arch}.attention.recurrent_layers"},
    {&ModelConfig::rope_sections, "rope_parameters.mrope_section|rope_scaling.mrope_section", ""},
    {&ModelConfig::n_nextn, "mtp_num_hidden_layers", "{arch}.nextn_predict_layers"},
    {&ModelConfig::partial_rotary,
     "rope_parameters.partial_rotary_factor|rope_parameters.sliding_attention.partial_rotary_factor|"
     "partial_rotary_factor|rotary_emb_fraction",
     ""},
    {&ModelConfig::n_rot, "", "{arch}.rope.dimension_count"},
    {&ModelConfig::sliding_window, "sliding_window", "{arch}.attention.sliding_window"},
    {&ModelConfig::use_sliding_window, "use_sliding_window", ""},
    {&ModelConfig::tie_embeddings, "tie_word_embeddings", ""},
    {&ModelConfig::hidden_act, "hidden_act|hidden_activation", ""},
    {&ModelConfig::name, "_name_or_path", "general.name"},
    {&ModelConfig::d_model, "d_model", "{arch}.embedding_length"},
    {&ModelConfig::n_enc_layer, "encoder_layers", "{arch}.encoder.block_count"},
    {&ModelConfig::n_enc_head, "encoder_attention_heads", "{arch}.encoder.attention.head_count"},
    {&ModelConfig::n_enc_ff, "encoder_ffn_dim", "{arch}.encoder.feed_forward_length"},
    {&ModelConfig::n_enc_ctx, "max_source_positions", "{arch}.encoder.context_length"},
    {&ModelConfig::n_mels, "num_mel_bins", "{arch}.encoder.mel_bins"},
    {&ModelConfig::n_dec_layer, "decoder_layers", "{arch}.block_count"},
    {&ModelConfig::n_dec_head, "decoder_attention_heads", "{arch}.attention.head_count"},
    {&ModelConfig::n_dec_ff, "decoder_ffn_dim", "{arch}.feed_forward_length", &ModelConfig::layer_n_ff},
    {&ModelConfig::n_dec_ctx, "max_target_positions", "{arch}.context_length"},
    {&ModelConfig::scale_embedding, "scale_embedding", "{arch}.scale_embedding"},
    {&ModelConfig::activation_function, "activation_function", "{arch}.activation_function"},
    {&ModelConfig::n_type_vocab, "type_vocab_size", "tokenizer.ggml.token_type_count"},
    {&ModelConfig::norm_eps, "layer_norm_eps|layer_norm_epsilon|norm_eps", "{arch}.attention.layer_norm_epsilon"},
    {&ModelConfig::pad_token_id, "pad_token_id", ""},
    {&ModelConfig::position_embedding_type, "position_embedding_type", ""},
    {&ModelConfig::pooling_type, "", "{arch}.pooling_type"},
    {&ModelConfig::cls_labels, "", "{arch}.classifier.output_labels"},
    {&ModelConfig::local_attention, "local_attention", ""},
    {&ModelConfig::hidden_activation, "", "{arch}.hidden_activation"},
    {&RopeScaling::type,
     "rope_parameters.rope_type|rope_parameters.full_attention.rope_type|rope_scaling.rope_type|rope_scaling.type",
     "{arch}.rope.scaling.type"},
    {&RopeScaling::factor, "rope_parameters.factor|rope_parameters.full_attention.factor|rope_scaling.factor",
     "{arch}.rope.scaling.factor"},
    {&RopeScaling::original_ctx,
     "rope_parameters.original_max_position_embeddings|rope_scaling.original_max_position_embeddings",
     "{arch}.rope.scaling.original_context_length"},
    {&RopeScaling::low_freq_factor, "rope_parameters.low_freq_factor|rope_scaling.low_freq_factor", ""},
    {&RopeScaling::high_freq_factor, "rope_parameters.high_freq_factor|rope_scaling.high_freq_factor", ""},
    {&RopeScaling::beta_fast, "rope_parameters.beta_fast|rope_scaling.beta_fast",
     "{arch}.rope.scaling.yarn_beta_fast"},
    {&RopeScaling::beta_slow, "rope_parameters.beta_slow|rope_scaling.beta_slow",
     "{arch}.rope.scaling.yarn_beta_slow"},
    {&RopeScaling::attention_factor, "rope_parameters.attention_factor|rope_scaling.attention_factor",
     "{arch}.rope.scaling.attn_factor"},
    {&RopeScaling::mscale, "rope_parameters.mscale|rope_scaling.mscale", ""},
    {&RopeScaling::mscale_all_dim, "rope_parameters.mscale_all_dim|rope_scaling.mscale_all_dim", ""},
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

const nlohmann::json* json_path(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json* cur = &j;
  for (const std::string& part : split(path, '.')) {
    if (!cur->is_object()) return nullptr;
    auto it = cur->find(part);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur->is_null() ? nullptr : cur;
}

int32_t to_i32(double v, const std::string& key) {
  BRISK_CHECK(std::isfinite(v) && v == std::floor(v) && v >= -2147483648.0 && v <= 2147483647.0,
              "config key '", key, "': ", v, " is not a 32-bit integer");
  return int32_t(v);
}

float to_f32(double v, const std::string& key) {
  BRISK_CHECK(std::isfinite(v) && std::fabs(v) <= 3.0e38, "config key '", key, "': ", v,
              " is not a finite 32-bit float");
  return float(v);
}

// Assigns a JSON value to the field; throws naming the key on a type mismatch.
void assign_json(ModelConfig& c, const Field& field, const nlohmann::json& v, const std::string& key) {
  std::visit(
      [&](auto member) {
        using M = decltype(member);
        auto& target = [&]() -> auto& {
          if constexpr (std::is_same_v<M, int32_t RopeScaling::*> || std::is_same_v<M, float RopeScaling::*> ||
                        std::is_same_v<M, std::string RopeScaling::*>)
            return c.rope_scaling.*member;
          else
            return c.*member;
        }();
        using T = std::remove_reference_t<decltype(target)>;
        if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
          BRISK_CHECK(v.is_array() && v.size() <= 65536, "config key '", key, "' must be an array of integers");
          target.clear();
          for (const nlohmann::json& e : v) {
            BRISK_CHECK(e.is_number() || e.is_boolean(), "config key '", key, "' must be an array of integers");
            target.push_back(e.is_boolean() ? int32_t(e.get<bool>()) : to_i32(e.get<double>(), key));
          }
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          BRISK_CHECK(v.is_array() && v.size() <= 65536, "config key '", key, "' must be an array of strings");
          target.clear();
          for (const nlohmann::json& e : v) {
            BRISK_CHECK(e.is_string(), "config key '", key, "' must be an array of strings");
            target.push_back(e.get<std::string>());
          }
        } else if constexpr (std::is_same_v<T, std::string>) {
          BRISK_CHECK(v.is_string(), "config key '", key, "' must be a string");
          target = v.get<std::string>();
        } else if constexpr (std::is_same_v<T, bool>) {
          BRISK_CHECK(v.is_boolean(), "config key '", key, "' must be a boolean");
          target = v.get<bool>();
        } else if constexpr (std::is_same_v<T, float>) {
          BRISK_CHECK(v.is_number(), "config key '", key, "' must be a number");
          target = to_f32(v.get<double>(), key);
        } else {
          BRISK_CHECK(v.is_number(), "config key '", key, "' must be an integer");
          target = to_i32(v.get<double>(), key);
        }
      },
      field);
}

void assign_gguf(ModelConfig& c, const KeyRow& row, const gguf::File& f, const std::string& key) {
  if (const gguf::Value* v = f.find(key); row.per_layer && v && v->as_array()) {
    std::vector<int32_t>& dst = c.*row.per_layer;
    dst.clear();
    for (int64_t x : f.get_int_array(key)) {
      BRISK_CHECK(x >= 0 && x <= INT32_MAX, "GGUF key '", key, "': per-layer value ", x, " out of range");
      dst.push_back(int32_t(x));
    }
    BRISK_CHECK(!dst.empty() && dst.size() <= 65536, "GGUF key '", key, "': ", dst.size(), " per-layer values");
    c.*std::get<int32_t ModelConfig::*>(row.field) = dst[0];
    return;
  }
  const Field& field = row.field;
  std::visit(
      [&](auto member) {
        using M = decltype(member);
        auto& target = [&]() -> auto& {
          if constexpr (std::is_same_v<M, int32_t RopeScaling::*> || std::is_same_v<M, float RopeScaling::*> ||
                        std::is_same_v<M, std::string RopeScaling::*>)
            return c.rope_scaling.*member;
          else
            return c.*member;
        }();
        using T = std::remove_reference_t<decltype(target)>;
        if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
          // An array of integers or booleans, or one value for every layer.
          const gguf::Value* v = f.find(key);
          target.clear();
          if (const gguf::Array* arr = v->as_array()) {
            BRISK_CHECK(arr->items.size() <= 65536, "GGUF key '", key, "': array too long");
            for (const gguf::Value& e : arr->items) {
              const auto b = e.as_bool();
              const auto i = e.as_int();
              BRISK_CHECK(b || (i && *i >= INT32_MIN && *i <= INT32_MAX), "GGUF key '", key,
                          "' must be an array of integers or booleans");
              target.push_back(b ? int32_t(*b) : int32_t(*i));
            }
          } else {
            const auto b = v->as_bool();
            const auto i = v->as_int();
            BRISK_CHECK(b || (i && *i >= INT32_MIN && *i <= INT32_MAX), "GGUF key '", key, "' must be an integer");
            target.push_back(b ? int32_t(*b) : int32_t(*i));
          }
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          target = f.get_string_array(key);  // (another type: an error naming the key)
        } else if constexpr (std::is_same_v<T, std::string>) {
          auto s = f.get_string(key);
          BRISK_CHECK(s.has_value(), "GGUF key '", key, "' must be a string");
          target = *s;
        } else if constexpr (std::is_same_v<T, bool>) {
          auto b = f.get_bool(key);
          BRISK_CHECK(b.has_value(), "GGUF key '", key, "' must be a boolean");
          target = *b;
        } else if constexpr (std::is_same_v<T, float>) {
          auto d = f.get_float(key);
          BRISK_CHECK(d.has_value(), "GGUF key '", key, "' must be a number");
          target = to_f32(*d, key);
        } else {
          auto i = f.get_int(key);
          BRISK_CHECK(i.has_value() && *i >= INT32_MIN && *i <= INT32_MAX, "GGUF key '", key,
                      "' must be a 32-bit integer");
          target = int32_t(*i);
        }
      },
      field);
}

// transformers' per_layer_config: {"<layer>": {"head_dim": .., "num_key_value_heads": ..,
// "intermediate_size": ..}, ...}, overrides of the model-wide values for single layers.
void fill_per_layer_config(ModelConfig& c, const nlohmann::json& map) {
  BRISK_CHECK(map.is_object(), "config key 'per_layer_config' must be an object of layer overrides");
  const std::pair<const char*, std::vector<int32_t> ModelConfig::*> kOverrides[] = {
      {"head_dim", &ModelConfig::layer_head_dim},
      {"num_key_value_heads", &ModelConfig::layer_n_head_kv},
      {"intermediate_size", &ModelConfig::layer_n_ff},
  };
  BRISK_CHECK(c.n_layer > 0 && c.n_layer <= 65536, "config key 'per_layer_config' needs num_hidden_layers");
  for (const auto& [layer, overrides] : map.items()) {
    const std::string where = "per_layer_config." + layer;
    char* end = nullptr;
    const long il = std::strtol(layer.c_str(), &end, 10);
    BRISK_CHECK(!layer.empty() && end && *end == '\0' && il >= 0 && il < c.n_layer, "config key '", where,
                "': not a layer index below ", c.n_layer);
    BRISK_CHECK(overrides.is_object(), "config key '", where, "' must be an object");
    for (const auto& [key, value] : overrides.items()) {
      if (value.is_null()) continue;
      std::vector<int32_t> ModelConfig::*target = nullptr;
      for (const auto& [name, member] : kOverrides)
        if (key == name) target = member;
      BRISK_CHECK(target, "config key '", where, ".", key, "': per-layer overrides of this key are not supported");
      BRISK_CHECK(value.is_number(), "config key '", where, ".", key, "' must be an integer");
      std::vector<int32_t>& dst = c.*target;
      dst.resize(size_t(c.n_layer), 0);
      dst[size_t(il)] = to_i32(value.get<double>(), where + "." + key);
      BRISK_CHECK(dst[size_t(il)] > 0, "config key '", where, ".", key, "' must be positive");
    }
  }
}

// The fields the converter writes even at their default values: llama.cpp's readers require
// them.
bool always_written(const Field& f) {
  for (const Field& a : {Field{&ModelConfig::n_vocab}, Field{&ModelConfig::n_embd}, Field{&ModelConfig::n_layer},
                         Field{&ModelConfig::n_head}, Field{&ModelConfig::n_head_kv}, Field{&ModelConfig::head_dim},
                         Field{&ModelConfig::n_ff}, Field{&ModelConfig::n_ctx_train}, Field{&ModelConfig::rms_eps},
                         Field{&ModelConfig::rope_theta}})
    if (a == f) return true;
  return false;
}

}  // namespace

void config_write_gguf(const ModelConfig& c, const std::string& arch, gguf::Writer& w) {
  const ModelConfig defaults;
  for (const KeyRow& row : kKeyTable) {
    std::string key = row.gguf;
    const size_t p = key.find("{arch}");
    if (p == std::string::npos) continue;  // general.* keys are the converter's
    key.replace(p, 6, arch);
    std::visit(
        [&](auto member) {
          using M = decltype(member);
          auto get = [&](const ModelConfig& m) -> const auto& {
            if constexpr (std::is_same_v<M, int32_t RopeScaling::*> || std::is_same_v<M, float RopeScaling::*> ||
                          std::is_same_v<M, std::string RopeScaling::*>)
              return m.rope_scaling.*member;
            else
              return m.*member;
          };
          const auto& v = get(c);
          using T = std::remove_cvref_t<decltype(v)>;
          if (!always_written(row.field) && v == get(defaults)) return;
          if constexpr (std::is_same_v<T, std::string>) w.set(key, gguf::Value::from_string(v));
          else if constexpr (std::is_same_v<T, bool>) w.set(key, gguf::Value::from_bool(v));
          else if constexpr (std::is_same_v<T, float>) w.set(key, gguf::Value::from_f32(v));
          else if constexpr (std::is_same_v<T, int32_t>) w.set(key, gguf::Value::from_u32(uint32_t(v)));
          else fail("convert: GGUF key ", key, " of a list is not written");
        },
        row.field);
  }
  // llama.cpp reads the value head size apart from the key size; brisk's models use one.
  w.set(arch + ".attention.value_length", gguf::Value::from_u32(uint32_t(c.head_dim)));
}

void config_fill_from_hf(ModelConfig& c, const nlohmann::json& j) {
  BRISK_CHECK(j.is_object(), "config.json: top level is not an object");
  // A multimodal checkpoint keeps its language model's settings in text_config: those win over
  // the top level's.
  const nlohmann::json* text = json_path(j, "text_config");
  if (text && !text->is_object()) text = nullptr;
  for (const KeyRow& row : kKeyTable) {
    if (!*row.hf) continue;
    bool found = false;
    for (const nlohmann::json* scope : {text, &j}) {
      if (!scope) continue;
      for (const std::string& key : split(row.hf, '|')) {
        if (const nlohmann::json* v = json_path(*scope, key)) {
          assign_json(c, row.field, *v, scope == text ? "text_config." + key : key);
          found = true;
          break;
        }
      }
      if (found) break;
    }
  }
  // Keys outside the table, also text_config's first.
  auto find = [&](const char* key) -> const nlohmann::json* {
    const nlohmann::json* v = text ? json_path(*text, key) : nullptr;
    return v ? v : json_path(j, key);
  };
  if (const nlohmann::json* m = find("per_layer_config")) fill_per_layer_config(c, *m);
  // Gemma: a boolean (Gemma 3: true for all tokens) or "vision" / "all" (Gemma 4).
  if (const nlohmann::json* b = find("use_bidirectional_attention")) {
    BRISK_CHECK(b->is_boolean() || b->is_string(), "config key 'use_bidirectional_attention' must be a boolean or a string");
    c.bidirectional = b->is_string() ? b->get<std::string>() : b->get<bool>() ? "all" : "";
  }
}

void config_fill_from_gguf(ModelConfig& c, const gguf::File& f) {
  const std::string arch = f.architecture();
  for (const KeyRow& row : kKeyTable) {
    if (!*row.gguf) continue;
    std::string key = row.gguf;
    if (const size_t p = key.find("{arch}"); p != std::string::npos) key.replace(p, 6, arch);
    if (f.find(key)) assign_gguf(c, row, f, key);
  }
  // Which layers use the sliding window: one flag per layer (Gemma 4) or a period (every n-th
  // layer full).
  const std::string key = arch + ".attention.sliding_window_pattern";
  if (const gguf::Value* v = f.find(key)) {
    if (const gguf::Array* a = v->as_array()) {
      c.layer_types.clear();
      for (size_t i = 0; i < a->items.size() && i <= 65536; ++i) {
        const auto b = a->items[i].as_bool();
        BRISK_CHECK(b.has_value(), "GGUF key '", key, "' must be an array of booleans");
        c.layer_types.push_back(*b ? "sliding_attention" : "full_attention");
      }
    } else {
      const auto n = f.get_int(key);
      BRISK_CHECK(n && *n >= 0 && *n <= 65536, "GGUF key '", key, "' out of range");
      c.swa_pattern = int32_t(*n);
    }
  }
}

void ModelConfig::finalize() {
  if (n_head_kv == 0) n_head_kv = n_head;
  BRISK_CHECK(n_embd > 0 && n_layer > 0 && n_head > 0 && n_vocab > 0 && n_ff > 0,
              "model config: hidden size, layers, heads, vocabulary and MLP size must be positive "
              "(got n_embd=", n_embd, " n_layer=", n_layer, " n_head=", n_head, " n_vocab=", n_vocab,
              " n_ff=", n_ff, ")");
  BRISK_CHECK(n_head_kv > 0 && n_head % n_head_kv == 0, "model config: ", n_head,
              " attention heads are not a multiple of ", n_head_kv, " KV heads");
  if (head_dim == 0) {
    BRISK_CHECK(n_embd % n_head == 0, "model config: hidden size ", n_embd,
                " is not divisible by ", n_head, " heads and head_dim is not given");
    head_dim = n_embd / n_head;
  }
  BRISK_CHECK(head_dim > 0 && head_dim <= 1024, "model config: head_dim ", head_dim, " out of range");
  BRISK_CHECK(n_head <= 65536 && n_layer <= 65536, "model config: ", n_head, " heads / ", n_layer,
              " layers out of range");
  if (n_rot == 0) n_rot = int32_t(std::lround(head_dim * double(partial_rotary)));
  n_rot -= n_rot % 2;
  BRISK_CHECK(n_rot > 0 && n_rot <= head_dim, "model config: rotary dims ", n_rot,
              " out of range for head_dim ", head_dim);
  if (!use_sliding_window) sliding_window = 0;
  BRISK_CHECK(sliding_window >= 0, "model config: negative sliding_window");
  if (n_ctx_train <= 0) n_ctx_train = 4096;
  if (hidden_act == "silu" || hidden_act == "swish") {
    act = Activation::silu;
  } else if (hidden_act == "gelu_pytorch_tanh" || hidden_act == "gelu_tanh") {
    act = Activation::gelu_tanh;
  } else {
    fail("model config: unsupported hidden_act '", hidden_act, "'");
  }
  BRISK_CHECK(layer_types.empty() || int32_t(layer_types.size()) == n_layer, "model config: layer_types lists ",
              layer_types.size(), " layers, the model has ", n_layer);
  for (const std::string& t : layer_types)
    BRISK_CHECK(t == "sliding_attention" || t == "full_attention" || (t == "linear_attention" && linear_n_v_head > 0),
                "model config: unknown layer type '", t, "' in layer_types");
  BRISK_CHECK(swa_pattern >= 0 && rope_theta_swa >= 0.0f && attn_softcap >= 0.0f && final_softcap >= 0.0f &&
                  query_pre_attn_scalar >= 0.0f,
              "model config: negative sliding_window_pattern, rope_theta_swa, soft-cap or query_pre_attn_scalar");
  BRISK_CHECK(n_expert >= 0 && n_expert <= 4096, "model config: expert count ", n_expert, " out of range");
  if (n_expert > 0) {
    BRISK_CHECK(n_expert_used > 0 && n_expert_used <= n_expert, "model config: ", n_expert_used,
                " experts per token out of range for ", n_expert, " experts");
    BRISK_CHECK(n_ff_exp > 0, "model config: MoE model without a positive expert intermediate size");
  }
  if (attn_scale == 0.0f) attn_scale = float(1.0 / std::sqrt(double(head_dim)));
  // Per-layer shapes: zeros take the model-wide value.
  const std::pair<std::vector<int32_t>*, const char*> per_layer[] = {
      {&layer_head_dim, "head_dim"}, {&layer_n_head_kv, "KV heads"}, {&layer_n_ff, "MLP size"}};
  for (const auto& [vec, what] : per_layer) {
    if (vec->empty()) continue;
    BRISK_CHECK(int32_t(vec->size()) == n_layer, "model config: per-layer ", what, " lists ", vec->size(),
                " layers, the model has ", n_layer);
    const int32_t fallback = vec == &layer_head_dim ? head_dim : vec == &layer_n_head_kv ? n_head_kv : n_ff;
    for (int32_t& x : *vec) x = x == 0 ? fallback : x;
  }
  for (int il = 0; il < n_layer; ++il) {
    BRISK_CHECK(head_dim_of(il) > 0 && head_dim_of(il) <= 1024, "model config: layer ", il, " head_dim ",
                head_dim_of(il), " out of range");
    BRISK_CHECK(n_head_kv_of(il) > 0 && n_head % n_head_kv_of(il) == 0, "model config: layer ", il, ": ", n_head,
                " attention heads are not a multiple of ", n_head_kv_of(il), " KV heads");
    BRISK_CHECK(n_ff_of(il) > 0, "model config: layer ", il, " MLP size ", n_ff_of(il), " is not positive");
  }
}

int32_t ModelConfig::max_head_dim() const {
  int32_t m = head_dim;
  for (int il = 0; il < n_layer; ++il) m = std::max(m, head_dim_of(il));
  return m;
}

int32_t ModelConfig::max_q_width() const {
  int32_t m = q_width();
  for (int il = 0; il < n_layer; ++il) m = std::max(m, q_width_of(il));
  return m;
}

int32_t ModelConfig::max_kv_width() const {
  int32_t m = kv_width();
  for (int il = 0; il < n_layer; ++il) m = std::max(m, kv_width_of(il));
  return m;
}

int32_t ModelConfig::max_n_ff() const {
  int32_t m = n_ff;
  for (int il = 0; il < n_layer; ++il) m = std::max(m, n_ff_of(il));
  return m;
}

}  // namespace brisk
