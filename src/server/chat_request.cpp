#include "server/chat_request.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <limits>
#include <map>

#include "core/error.h"
#include "server/constraints.h"
#include "server/errors.h"
#include "server/json_fields.h"
#include "server/route_util.h"
#include "text/tokenizer.h"

namespace brisk::server {

static std::string random_call_seed() {
  static std::atomic<uint64_t> n{0};
  return str_cat("call_", std::chrono::steady_clock::now().time_since_epoch().count() % 1000000007, "_", n++);
}

uint64_t fresh_sampling_seed() { return random_u64(); }

void parse_sampling(const json& body, SamplerParams& p, int32_t n_vocab) {
  if (auto v = get_number(body, "temperature", 0.0, 2.0)) p.temperature = float(*v);
  if (auto v = get_number(body, "top_p", 0.0, 1.0)) p.top_p = float(*v);
  if (auto v = get_int(body, "top_k", -1, 1 << 20)) p.top_k = int32_t(*v);
  if (auto v = get_number(body, "min_p", 0.0, 1.0)) p.min_p = float(*v);
  if (auto v = get_number(body, "presence_penalty", -2.0, 2.0)) p.presence_penalty = float(*v);
  if (auto v = get_number(body, "frequency_penalty", -2.0, 2.0)) p.frequency_penalty = float(*v);
  if (auto v = get_number(body, "repetition_penalty", 0.01, 10.0)) p.repeat_penalty = float(*v);
  if (auto v = get_int(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    p.seed = uint64_t(*v);
  else
    p.seed = fresh_sampling_seed();
  if (const json* lb = field(body, "logit_bias")) {
    if (!lb->is_object()) bad_request("logit_bias", "'logit_bias' must be an object of token id -> bias");
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab)
        bad_request("logit_bias", str_cat("'logit_bias' key '", key, "' is not a token id in [0, ", n_vocab, ")"));
      if (!it->is_number() || !std::isfinite(it->get<double>()) || std::fabs(it->get<double>()) > 100.0)
        bad_request("logit_bias", str_cat("'logit_bias' value for token ", key, " must be a number in [-100, 100]"));
      const double b = it->get<double>();
      // OpenAI semantics: -100 bans the token, +100 forces it.
      p.logit_bias.emplace_back(int32_t(id), b <= -100.0 ? -std::numeric_limits<float>::infinity() : float(b));
    }
  }
}

int32_t parse_speculative(const json& body) {
  const auto v = get_int(body, "speculative.n_max", 0, 64);
  return v ? int32_t(*v) : -1;
}

std::vector<std::string> parse_stop(const json& body, const char* name) {
  std::vector<std::string> out;
  const json* f = field(body, name);
  if (!f) return out;
  if (f->is_string()) {
    out.push_back(f->get<std::string>());
  } else if (f->is_array()) {
    if (f->size() > 16) bad_request(name, str_cat("'", name, "' has ", f->size(), " entries; at most 16"));
    for (const auto& s : *f) {
      if (!s.is_string()) bad_request(name, str_cat("'", name, "' entries must be strings"));
      out.push_back(s.get<std::string>());
    }
  } else {
    bad_request(name, str_cat("'", name, "' must be a string or an array of strings"));
  }
  for (const auto& s : out)
    if (s.size() > 1024) bad_request(name, str_cat("a '", name, "' entry is longer than 1024 bytes"));
  return out;
}

json parse_function_tools(const json& body) {
  const json* tools = field(body, "tools");
  if (!tools) return nullptr;
  if (!tools->is_array()) bad_request("tools", "'tools' must be an array");
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& t = (*tools)[i];
    const json* type = t.is_object() ? field(t, "type") : nullptr;
    if (!t.is_object() || (type && *type != "function") || !t.contains("function") ||
        !t["function"].is_object() || !t["function"].contains("name") || !t["function"]["name"].is_string())
      bad_request("tools", str_cat("tools[", i, "] must be {type: function, function: {name, ...}}"));
  }
  return tools->empty() ? json() : *tools;
}

size_t prompt_byte_limit(const LoadedModel& model) {
  int32_t longest = model.max_token_bytes.load();
  if (longest == 0) {
    const Tokenizer& tok = *model.tokenizer;
    size_t m = 1;
    for (int32_t id = 0; id < tok.vocab_size(); ++id) {
      try {
        m = std::max({m, tok.decode({id}, false).size(), tok.token_text(id).size()});
      } catch (const std::exception&) {
      }
    }
    longest = int32_t(std::min<size_t>(m + 1, 1u << 20));
    model.max_token_bytes = longest;
  }
  return size_t(std::max(model.n_ctx, 1)) * size_t(longest);
}

namespace {

void check_prompt_bytes(const LoadedModel& model, size_t bytes, const char* param) {
  const size_t limit = prompt_byte_limit(model);
  if (bytes > limit)
    throw HttpError(400, str_cat("the prompt has ", bytes, " bytes, more than the ", limit, " bytes that can fit in the context of ",
                                 model.n_ctx, " tokens of model '", model.name, "'"),
                    param);
}

// Bytes of every string in a JSON value (messages' text before the template adds to it).
size_t string_bytes(const json& j) {
  if (j.is_string()) return j.get_ref<const std::string&>().size();
  size_t n = 0;
  if (j.is_structured())
    for (const auto& v : j) n += string_bytes(v);
  return n;
}

}  // namespace

std::vector<int32_t> tokenize_prompt(const LoadedModel& model, const std::string& text, bool add_special,
                                     const char* param) {
  check_prompt_bytes(model, text.size(), param);
  return model.tokenizer->encode(text, EncodeOptions{.add_special = add_special, .parse_special = true});
}

std::shared_ptr<const CompiledSchema> parse_json_schema(const nlohmann::json& schema, const std::string& param,
                                                        const std::string& where) {
  try {
    return compile_json_schema(schema);
  } catch (const Error& e) {
    bad_request(param, str_cat(where, ": ", e.what()));
  }
}

PreparedChat prepare_chat(LoadedModel& model, ChatRequest req, int32_t max_tokens_ceiling) {
  if (!model.render_chat)
    throw HttpError(400, str_cat("model '", model.name, "' has no chat template; use /v1/completions"), "model");
  if (req.tool_choice == ToolChoice::named) {
    bool found = false;
    if (req.render.tools.is_array())
      for (const auto& t : req.render.tools)
        found |= t.contains("function") && t["function"].value("name", "") == req.tool_name;
    if (!found) bad_request("tool_choice", str_cat("tool_choice names '", req.tool_name, "', which is not in 'tools'"));
  }
  if ((req.tool_choice == ToolChoice::required) && !(req.render.tools.is_array() && !req.render.tools.empty()))
    bad_request("tool_choice", "tool_choice 'required' needs a non-empty 'tools'");

  const bool tools_offered = req.render.tools.is_array() && !req.render.tools.empty();
  const json tools = req.render.tools;
  // Every offered function's parameters must be a schema the constraint engine enforces: a
  // forced call is written to it, and a schema that is malformed or asks for what is not
  // enforced is refused whatever tool_choice says.
  std::map<std::string, std::shared_ptr<const CompiledSchema>> compiled;
  if (tools_offered) {
    for (size_t i = 0; i < tools.size(); ++i) {
      const json& f = tools[i]["function"];
      if (!f.contains("parameters") || f["parameters"].is_null()) continue;
      compiled[f.value("name", "")] = parse_json_schema(f["parameters"], "tools", str_cat("tools[", i, "].function.parameters"));
    }
  }
  if (req.tool_choice == ToolChoice::none) req.render.tools = nullptr;

  // Messages whose text alone cannot fit are refused before the template renders them.
  check_prompt_bytes(model, string_bytes(req.render.messages), "messages");
  PreparedChat out;
  try {
    out.prompt_text = model.render_chat(req.render);
  } catch (const HttpError&) {
    throw;
  } catch (const std::exception& e) {
    throw HttpError(400, str_cat("the chat template of model '", model.name, "' failed on these messages: ", e.what()),
                    "messages");
  }
  GenerationSpec& spec = out.spec;
  spec.prompt = tokenize_prompt(model, out.prompt_text, false);
  if (spec.prompt.empty()) bad_request("messages", "the rendered prompt is empty");
  const int32_t ceiling = max_tokens_ceiling > 0 ? max_tokens_ceiling : model.n_ctx;
  spec.max_tokens = resolve_max_tokens(model, spec.prompt.size(), req.max_tokens, ceiling, req.max_tokens_param);
  spec.n = req.n;
  spec.sampling = req.sampling;
  spec.stop = std::move(req.stop);
  spec.session = std::move(req.session);
  spec.logprobs = req.logprobs;
  spec.ignore_eos = req.ignore_eos;
  spec.draft_max = req.draft_max;

  ChatOutputOptions o;
  o.format = model.chat_format;
  o.starts_in_reasoning = chat_prompt_opens_reasoning(out.prompt_text, o.format) && !req.json_object;
  o.parse_tool_calls = tools_offered && req.tool_choice != ToolChoice::none;
  o.id_seed = random_call_seed();
  if (tools_offered) o.tools = tools;
  spec.single_tool_call = !req.parallel_tool_calls;
  if (req.tool_choice == ToolChoice::required || req.tool_choice == ToolChoice::named) {
    std::vector<std::string> names;
    if (req.tool_choice == ToolChoice::named) {
      names.push_back(req.tool_name);
    } else {
      for (const auto& t : tools) names.push_back(t["function"]["name"].get<std::string>());
    }
    // Each function's parameters schema shapes its arguments (none: any JSON object).
    std::vector<std::shared_ptr<const CompiledSchema>> schemas;
    for (const std::string& name : names) {
      auto it = compiled.find(name);
      schemas.push_back(it == compiled.end() ? nullptr : it->second);
    }
    const std::string free_until =
        o.starts_in_reasoning ? std::string(chat_prompt_reasoning_close(out.prompt_text, o.format)) : "";
    LoadedModel* m = &model;
    if (model.chat_format == ChatFormat::kQwenXml || model.chat_format == ChatFormat::kGemma4) {
      // Calls whose arguments are not a JSON object: <function=NAME><parameter=P>... (Qwen
      // XML) or call:NAME{key:value} (Gemma 4).
      std::vector<ToolFunctionSpec> functions;
      for (const std::string& name : names) {
        const json* params = nullptr;
        for (const auto& t : tools) {
          const json& f = t["function"];
          if (f.value("name", "") != name) continue;
          if (auto it = f.find("parameters"); it != f.end()) params = &*it;
          break;
        }
        functions.push_back(tool_function_spec(name, params));
      }
      if (model.chat_format == ChatFormat::kQwenXml) {
        spec.make_constraint = [m, functions, free_until] {
          return make_xml_tool_call_constraint(*m, functions, free_until);
        };
      } else {
        spec.make_constraint = [m, functions, free_until] {
          return make_gemma4_tool_call_constraint(*m, functions, free_until);
        };
      }
      spec.single_tool_call = true;
      spec.output = std::move(o);
      return out;
    }
    try {
      (void)tool_call_syntax(model.chat_format);
    } catch (const Error&) {
      bad_request("tool_choice", str_cat("tool_choice '", req.tool_choice == ToolChoice::named ? "named" : "required",
                                         "' cannot be enforced for the tool-call format '",
                                         chat_format_name(model.chat_format), "' of model '", model.name, "'"));
    }
    spec.make_constraint = [m, names, free_until, schemas] {
      return make_tool_call_constraint(*m, names, free_until, schemas);
    };
    spec.single_tool_call = true;
  } else if (req.json_schema) {
    LoadedModel* m = &model;
    spec.make_constraint = [m, schema = req.json_schema] { return make_schema_constraint(*m, schema); };
  } else if (req.json_object) {
    LoadedModel* m = &model;
    spec.make_constraint = [m] { return make_json_constraint(*m); };
  }
  spec.output = std::move(o);
  return out;
}

}  // namespace brisk::server
