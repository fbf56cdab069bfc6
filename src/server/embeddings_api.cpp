// Embedding and rerank routes over a model's EmbedQueue (runtime/embed_queue.h): requests are
// parsed and checked here (each error a 400 naming the field and input index), inputs tokenized
// (text needs the model's tokenizer), then the queue's worker packs them with the other requests
// waiting at that moment into the same forwards.
#include "server/embeddings_api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "runtime/embed_queue.h"
#include "server/json_fields.h"
#include "server/model_registry.h"
#include "server/ollama_common.h"
#include "server/route_util.h"

namespace brisk::server {

using json = nlohmann::json;

namespace {

std::string embed_base64(const void* data, size_t n) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const uint8_t*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t b = uint32_t(p[i]) << 16 | (i + 1 < n ? uint32_t(p[i + 1]) << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
    out += kAlphabet[b >> 18 & 63];
    out += kAlphabet[b >> 12 & 63];
    out += i + 1 < n ? kAlphabet[b >> 6 & 63] : '=';
    out += i + 2 < n ? kAlphabet[b & 63] : '=';
  }
  return out;
}

// Cuts ids to the model's maximum keeping the trailing special tokens (as the tokenizer's
// truncation does); false when too long and truncation was not asked for.
bool fit_length(const Embedder& e, std::vector<int32_t>& ids, bool truncate) {
  const size_t max = size_t(e.max_tokens());
  if (ids.size() <= max) return true;
  if (!truncate) return false;
  const Tokenizer* tok = e.model().tokenizer();
  size_t trail = 0;
  while (tok && trail + 1 < max && trail < ids.size() && tok->is_special(ids[ids.size() - 1 - trail])) ++trail;
  std::vector<int32_t> cut(ids.begin(), ids.begin() + int64_t(max - trail));
  cut.insert(cut.end(), ids.end() - int64_t(trail), ids.end());
  ids.swap(cut);
  return true;
}

std::vector<int32_t> text_ids(const Embedder& e, const std::string& text, const std::string& param) {
  if (!e.model().tokenizer())
    bad_request(param, "this model has no tokenizer (no tokenizer.json in its folder): give token ids instead of text");
  return e.tokenize(text);
}

// `input` as OpenAI specifies it: a string, an array of strings, an array of token ids, or an
// array of arrays of token ids.
std::vector<EmbedInput> parse_inputs(const Embedder& e, const json& input, const std::string& prompt, bool truncate,
                                     const char* param) {
  std::vector<EmbedInput> out;
  auto ids_of = [&](const json& arr, const std::string& where) {
    EmbedInput in;
    for (const auto& t : arr) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= e.vocab_size())
        bad_request(param, str_cat(where, ": token ids must be integers in [0, ", e.vocab_size(), ")"));
      in.ids.push_back(t.get<int32_t>());
    }
    return in;
  };
  if (input.is_string()) {
    out.push_back({.ids = text_ids(e, prompt + input.get<std::string>(), param)});
  } else if (input.is_array() && !input.empty() && input[0].is_number()) {
    out.push_back(ids_of(input, str_cat("'", param, "'")));
  } else if (input.is_array() && !input.empty()) {
    if (input.size() > 4096) bad_request(param, str_cat("'", param, "' holds ", input.size(), " inputs, at most 4096"));
    for (size_t i = 0; i < input.size(); ++i) {
      const json& x = input[i];
      if (x.is_string()) out.push_back({.ids = text_ids(e, prompt + x.get<std::string>(), param)});
      else if (x.is_array() && !x.empty()) out.push_back(ids_of(x, str_cat("'", param, "'[", i, "]")));
      else bad_request(param, str_cat("'", param, "'[", i, "] must be a string or a non-empty array of token ids"));
    }
  } else {
    bad_request(param, str_cat("'", param, "' must be a string, an array of strings, an array of token ids or an array of "
                               "arrays of token ids (non-empty)"));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].ids.empty()) bad_request(param, str_cat("input ", i, " has no tokens"));
    const size_t n = out[i].ids.size();
    if (!fit_length(e, out[i].ids, truncate))
      bad_request(param, str_cat("input ", i, " has ", n, " tokens, more than the model's maximum of ", e.max_tokens(),
                                 " (set \"truncate\": true to cut it)"));
  }
  return out;
}

// The prompt put before each text: `prompt_name` (a sentence-transformers prompt), else the
// model's default prompt.
std::string prompt_of(const Embedder& e, const json& body) {
  const PoolingConfig& p = e.pooling();
  if (auto name = get_string(body, "prompt_name")) {
    auto it = p.prompts.find(*name);
    if (it == p.prompts.end()) {
      std::string known;
      for (const auto& [k, v] : p.prompts) known += (known.empty() ? "" : ", ") + k;
      bad_request("prompt_name", str_cat("unknown prompt '", name->substr(0, 64), "' (the model has: ",
                                         known.empty() ? "none" : known, ")"));
    }
    return it->second;
  }
  return p.default_prompt.empty() ? std::string() : p.prompts.at(p.default_prompt);
}

int32_t dimensions_of(const Embedder& e, const json& body) {
  const auto d = get_int(body, "dimensions", 1, 1 << 20);
  if (!d) return 0;
  if (e.pooling().mode == PoolingMode::none) bad_request("dimensions", "'dimensions' needs a pooled model");
  if (*d > e.dim()) bad_request("dimensions", str_cat("'dimensions' ", *d, " exceeds the model's ", e.dim()));
  return int32_t(*d);
}

int64_t embed_token_count(const std::vector<EmbedInput>& in) {
  int64_t n = 0;
  for (const auto& x : in) n += int64_t(x.ids.size());
  return n;
}

void embeddings(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(st);
  InFlight in_flight(st);
  const json body = parse_body(req.body);
  auto model = st.registry->get_embed(get_string(body, "model").value_or(""));
  const Embedder& e = model->embed->embedder();
  const std::string format = get_string(body, "encoding_format").value_or("float");
  if (format != "float" && format != "base64")
    bad_request("encoding_format", "'encoding_format' must be \"float\" or \"base64\"");
  const json* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  const int32_t dims = dimensions_of(e, body);
  const std::vector<EmbedInput> inputs =
      parse_inputs(e, *input, prompt_of(e, body), get_bool(body, "truncate").value_or(false), "input");
  const std::vector<std::vector<float>> vecs = model->embed->embed(inputs, dims);
  const int32_t width = dims > 0 ? dims : e.dim();
  json data = json::array();
  for (size_t i = 0; i < vecs.size(); ++i) {
    json item = {{"object", "embedding"}, {"index", i}};
    if (format == "base64") {
      item["embedding"] = embed_base64(vecs[i].data(), vecs[i].size() * sizeof(float));
    } else if (e.pooling().mode == PoolingMode::none) {  // one vector per token
      json rows = json::array();
      for (size_t r = 0; r < vecs[i].size(); r += size_t(width))
        rows.push_back(std::vector<float>(vecs[i].begin() + int64_t(r), vecs[i].begin() + int64_t(r + size_t(width))));
      item["embedding"] = std::move(rows);
    } else {
      item["embedding"] = vecs[i];
    }
    data.push_back(std::move(item));
  }
  const int64_t n_tok = embed_token_count(inputs);
  reply_json(res, {{"object", "list"},
                   {"data", std::move(data)},
                   {"model", model->name},
                   {"usage", {{"prompt_tokens", n_tok}, {"total_tokens", n_tok}}}});
}

// Cross-encoder scores of (query, document) pairs: the one-label classification head's output
// through the model's CrossEncoder activation (Embedder::relevance; Sigmoid by default).
void rerank(ServerState& st, const httplib::Request& req, httplib::Response& res) {
  check_not_draining(st);
  InFlight in_flight(st);
  const json body = parse_body(req.body);
  auto model = st.registry->get_embed(get_string(body, "model").value_or(""));
  const Embedder& e = model->embed->embedder();
  if (e.n_cls() == 0)
    throw HttpError(400, str_cat("model '", model->name, "' has no classification head: it is an embedding model, not a "
                                 "reranker (a cross-encoder such as bge-reranker, or a yes/no reranker such as "
                                 "Qwen3-Reranker)"), "model");
  if (e.n_cls() > 1)
    throw HttpError(400, str_cat("model '", model->name, "' has a classification head of ", e.n_cls(),
                                 " labels: reranking needs a one-label cross-encoder or a yes/no reranker"), "model");
  const json* query = field(body, "query");
  if (!query || !(query->is_string() || query->is_array())) bad_request("query", "'query' (a string) is required");
  const json* docs = field(body, "documents");
  if (!docs || !docs->is_array() || docs->empty()) bad_request("documents", "'documents' must be a non-empty array");
  if (docs->size() > 4096) bad_request("documents", "at most 4096 documents");
  const bool truncate = get_bool(body, "truncate").value_or(true);
  const auto top_n = get_int(body, "top_n", 1, 1 << 30);
  const bool return_documents = get_bool(body, "return_documents").value_or(false);
  const std::vector<int32_t> q = query->is_string() ? text_ids(e, query->get<std::string>(), "query")
                                                    : parse_inputs(e, json::array({*query}), "", false, "query")[0].ids;
  std::vector<EmbedInput> pairs;
  std::vector<std::string> texts;
  for (size_t i = 0; i < docs->size(); ++i) {
    const json& d = (*docs)[i];
    std::string text;
    std::vector<int32_t> ids;
    if (d.is_string()) {
      text = d.get<std::string>();
    } else if (d.is_object() && d.contains("text") && d["text"].is_string()) {
      text = d["text"].get<std::string>();
    } else if (d.is_array()) {
      ids = parse_inputs(e, json::array({d}), "", false, "documents")[0].ids;
    } else {
      bad_request("documents", str_cat("'documents'[", i, "] must be a string, {\"text\": ...} or an array of token ids"));
    }
    texts.push_back(text);
    if (e.yes_no() && ids.empty() && query->is_string()) {
      // The prompt's body (query and document in their places) is tokenized as one text.
      try {
        pairs.push_back(e.pair_text(query->get<std::string>(), text, truncate, str_cat("document ", i)));
      } catch (const Error& err) {
        bad_request("documents", err.what());
      }
      continue;
    }
    if (ids.empty()) ids = text_ids(e, text, "documents");
    EmbedInput in = e.pair(q, ids);
    if (in.ids.size() > size_t(e.max_tokens())) {
      if (!truncate)
        bad_request("documents", str_cat("document ", i, " with the query has ", in.ids.size(),
                                         " tokens, more than the model's maximum of ", e.max_tokens()));
      // Cut the document's text tokens (its special tokens stay) until the pair fits.
      const Tokenizer* tok = e.model().tokenizer();
      size_t trail = 0;
      while (tok && trail < ids.size() && tok->is_special(ids[ids.size() - 1 - trail])) ++trail;
      const size_t over = in.ids.size() - size_t(e.max_tokens());
      if (over > ids.size() - trail)
        bad_request("query", str_cat("the query leaves no room for document ", i, " within the model's maximum of ",
                                     e.max_tokens(), " tokens"));
      ids.erase(ids.end() - int64_t(trail) - int64_t(over), ids.end() - int64_t(trail));
      in = e.pair(q, ids);
    }
    pairs.push_back(std::move(in));
  }
  const std::vector<std::vector<float>> scores = model->embed->classify(pairs);
  std::vector<std::pair<float, size_t>> order;
  for (size_t i = 0; i < scores.size(); ++i) order.push_back({e.relevance(scores[i]), i});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (top_n && size_t(*top_n) < order.size()) order.resize(size_t(*top_n));
  json results = json::array();
  for (const auto& [score, i] : order) {
    json r = {{"index", i}, {"relevance_score", score}};
    if (return_documents) r["document"] = {{"text", texts[i]}};
    results.push_back(std::move(r));
  }
  const int64_t n_tok = embed_token_count(pairs);
  reply_json(res, {{"id", random_id("rerank-")},
                   {"model", model->name},
                   {"results", std::move(results)},
                   {"usage", {{"prompt_tokens", n_tok}, {"total_tokens", n_tok}}}});
}

}  // namespace

void ollama_embed_reply(ServerState& st, const json& body, const std::string& served, bool legacy, httplib::Response& res) {
  check_not_draining(st);
  InFlight in_flight(st);
  const auto t0 = std::chrono::steady_clock::now();
  auto model = st.registry->load(served);
  if (!model->embed)  // Ollama's wording
    throw HttpError(400, str_cat("\"", served, "\" does not support embeddings: embeddings are not supported by this model"),
                    "model");
  const auto t1 = std::chrono::steady_clock::now();
  const Embedder& e = model->embed->embedder();
  if (e.pooling().mode == PoolingMode::none) bad_request("model", "the model pools nothing (token embeddings)");
  if (legacy) {
    const auto prompt = get_string(body, "prompt");
    if (!prompt) bad_request("prompt", "'prompt' (a string) is required");
    const std::vector<EmbedInput> in = parse_inputs(e, json(*prompt), "", true, "prompt");
    reply_json(res, {{"embedding", model->embed->embed(in, 0)[0]}});
    return;
  }
  const json* input = field(body, "input");
  if (!input) bad_request("input", "'input' is required");
  const int32_t dims = dimensions_of(e, body);
  const std::vector<EmbedInput> inputs =
      parse_inputs(e, *input, prompt_of(e, body), get_bool(body, "truncate").value_or(true), "input");
  std::vector<std::vector<float>> vecs = model->embed->embed(inputs, dims);
  for (auto& v : vecs) l2_normalize(v.data(), int64_t(v.size()));  // Ollama normalises /api/embed
  const auto t2 = std::chrono::steady_clock::now();
  reply_json(res, {{"model", ollama_listed_name(served)},
                   {"embeddings", vecs},
                   {"total_duration", ollama_nanos(t2 - t0)},
                   {"load_duration", ollama_nanos(t1 - t0)},
                   {"prompt_eval_count", embed_token_count(inputs)}});
}

void register_embeddings_routes(httplib::Server& http, ServerState& state) {
  ServerState* st = &state;
  add_post_route(http, state, "/v1/embeddings", "/v1/embeddings", Dialect::openai,
                 [st](const httplib::Request& req, httplib::Response& res) { embeddings(*st, req, res); });
  for (const char* path : {"/v1/rerank", "/rerank", "/v2/rerank"})
    add_post_route(http, state, path, path, Dialect::openai,
                   [st](const httplib::Request& req, httplib::Response& res) { rerank(*st, req, res); });
}

}  // namespace brisk::server
