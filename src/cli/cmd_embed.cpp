// `brisk embed` and `brisk rerank`: text embeddings and cross-encoder scores with an
// encoder-only model (runtime/embedder.h). embed reads its texts from the command line or, one
// per line, from stdin, and prints one JSON line per text ({"index", "tokens", "embedding"});
// --ids takes comma-separated token ids instead of text (models without a tokenizer). rerank
// scores each document against the query and prints the documents by score as JSON lines.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "runtime/embedder.h"

namespace {

using brisk::cli::ArgParser;

struct Args {
  std::string model, device = "cpu", quant, token, prompt_name, pooling, query, yes_no = "auto", instruction;
  std::vector<std::string> texts;
  bool ids = false, truncate = false, raw = false;
  int32_t threads = 0, dimensions = 0, batch = 8192;
};

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::stringstream ss(s);
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) ids.push_back(int32_t(brisk::cli::parse_integer("--ids", item, 0, INT32_MAX)));
  }
  return ids;
}

void common_options(ArgParser& p, Args& a) {
  p.text({"--device"}, &a.device, "D", "cpu (default) | cuda | cuda:N");
  p.integer({"-t", "--threads"}, &a.threads, 0, 1024, "N", "CPU threads (default: all cores)");
  p.text({"--quant"}, &a.quant, "T", "quantize safetensors weights at load: q8_0 | q4_0 | q4_k | f16 | bf16");
  p.integer({"-b", "--batch"}, &a.batch, 1, 1 << 20, "N", "tokens per forward (inputs are packed; default 8192)");
  p.flag({"--truncate"}, &a.truncate, "cut inputs longer than the model's maximum (default: an error)");
  p.flag({"--ids"}, &a.ids, "inputs are comma-separated token ids, not text");
  p.text({"--hf-token"}, &a.token, "TOKEN", "Hugging Face token for gated Hub models");
}

std::shared_ptr<const brisk::Model> load(const Args& a) {
  const std::string path = brisk::cli::resolve_model(a.model, a.token);
  return brisk::cli::load_model({.path = path, .quant = a.quant, .n_threads = a.threads});
}

// Ids of one input, cut to the maximum when asked (keeping trailing special tokens).
std::vector<int32_t> input_ids(const brisk::Embedder& e, const Args& a, const std::string& text, const std::string& prefix,
                               size_t index) {
  std::vector<int32_t> ids = a.ids ? parse_ids(text) : e.tokenize(prefix + text);
  const size_t max = size_t(e.max_tokens());
  if (ids.size() > max) {
    if (!a.truncate)
      brisk::fail("input ", index, " has ", ids.size(), " tokens, more than the model's maximum of ", max,
                  " (--truncate cuts it)");
    const brisk::Tokenizer* tok = e.model().tokenizer();
    size_t trail = 0;
    while (tok && trail + 1 < max && tok->is_special(ids[ids.size() - 1 - trail])) ++trail;
    std::vector<int32_t> cut(ids.begin(), ids.begin() + int64_t(max - trail));
    cut.insert(cut.end(), ids.end() - int64_t(trail), ids.end());
    ids.swap(cut);
  }
  return ids;
}

std::vector<std::string> stdin_lines() {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

int cmd_embed(const std::vector<std::string>& argv) {
  Args a;
  ArgParser p("embed", "MODEL [TEXT...] [options]",
              "Text embeddings: one JSON line per text ({\"index\", \"tokens\", \"embedding\"}); texts from the "
              "command line, else one per line on stdin.");
  p.model(&a.model, "embedding model: Hugging Face folder (sentence-transformers or transformers), GGUF file or Hub "
                    "reference");
  p.positionals("TEXT", &a.texts, "texts to embed (default: lines of stdin)", 0);
  p.integer({"--dimensions"}, &a.dimensions, 1, 1 << 20, "N", "keep the first N dimensions (Matryoshka)");
  p.text({"--prompt-name"}, &a.prompt_name, "NAME", "a prompt of the model's sentence-transformers config (e.g. query)");
  p.text({"--pooling"}, &a.pooling, "P", "override the model's pooling: mean | cls | last | max | none");
  p.flag({"--hidden"}, &a.raw, "print the last hidden state of every token instead (no pooling)");
  common_options(p, a);
  if (!p.parse(argv)) return 0;
  if (a.texts.empty()) a.texts = stdin_lines();
  if (a.texts.empty()) brisk::cli::usage_fail("no texts (give them as arguments or lines on stdin)");
  auto model = load(a);
  brisk::Embedder e(model, {.device = a.device, .n_threads = a.threads, .n_batch = a.batch});
  std::string prefix;
  if (!a.prompt_name.empty()) {
    auto it = e.pooling().prompts.find(a.prompt_name);
    if (it == e.pooling().prompts.end()) brisk::cli::usage_fail("--prompt-name '", a.prompt_name, "': the model has no such prompt");
    prefix = it->second;
  } else if (!e.pooling().default_prompt.empty()) {
    prefix = e.pooling().prompts.at(e.pooling().default_prompt);
  }
  std::vector<brisk::EmbedInput> inputs;
  for (size_t i = 0; i < a.texts.size(); ++i) inputs.push_back({.ids = input_ids(e, a, a.texts[i], prefix, i)});
  std::vector<std::vector<float>> out;
  int32_t width = e.dim();
  if (a.raw) {
    out = e.hidden(inputs);
    width = int32_t(out[0].size() / inputs[0].ids.size());
  } else {
    brisk::PoolingConfig pc = e.pooling();
    if (!a.pooling.empty()) {
      pc.mode = brisk::pooling_from_name(a.pooling);
      const std::vector<std::vector<float>> h = e.hidden(inputs);
      for (size_t i = 0; i < h.size(); ++i) {
        out.push_back(brisk::pool(pc, h[i].data(), int64_t(inputs[i].ids.size()),
                                  int32_t(h[i].size() / inputs[i].ids.size())));
        if (a.dimensions > 0) out.back() = brisk::truncate_dims(out.back(), e.dim(), a.dimensions, pc.normalize);
      }
    } else {
      out = e.embed(inputs, a.dimensions);
    }
    if (pc.mode != brisk::PoolingMode::none && a.dimensions > 0) width = std::min(width, a.dimensions);
  }
  for (size_t i = 0; i < out.size(); ++i) {
    nlohmann::json line = {{"index", i}, {"tokens", inputs[i].ids.size()}};
    if (int64_t(out[i].size()) == width) {
      line["embedding"] = out[i];
    } else {  // one vector per token
      nlohmann::json rows = nlohmann::json::array();
      for (size_t r = 0; r + size_t(width) <= out[i].size(); r += size_t(width))
        rows.push_back(std::vector<float>(out[i].begin() + int64_t(r), out[i].begin() + int64_t(r) + width));
      line["embedding"] = std::move(rows);
    }
    std::printf("%s\n", line.dump().c_str());
  }
  return 0;
}

int cmd_rerank(const std::vector<std::string>& argv) {
  Args a;
  ArgParser p("rerank", "MODEL --query Q [DOC...] [options]",
              "Scores documents against a query with a cross-encoder (a classification head, e.g. bge-reranker): "
              "JSON lines {\"index\", \"score\", \"document\"} by decreasing score; documents from the command line, "
              "else one per line on stdin.");
  p.model(&a.model, "cross-encoder: Hugging Face folder, GGUF file or Hub reference");
  p.text({"-q", "--query"}, &a.query, "Q", "the query (required)");
  p.positionals("DOC", &a.texts, "documents (default: lines of stdin)", 0);
  p.flag({"--raw"}, &a.raw,
         "print the head's raw logit (yes/no reranker: logit yes - no) instead of its score (the model's "
         "activation, Sigmoid by default)");
  p.text({"--yes-no"}, &a.yes_no, "auto|on|off",
         "score a causal LM by its yes / no logits at the end of the reranking prompt (Qwen3-Reranker); auto: a GGUF "
         "with pooling_type rank and the yes / no head, or a causal-LM folder named *reranker* (default auto)");
  p.text({"--instruction"}, &a.instruction, "TEXT", "the yes/no reranker prompt's instruction (default: the model card's)");
  common_options(p, a);
  if (!p.parse(argv)) return 0;
  if (a.query.empty()) brisk::cli::usage_fail("--query is required");
  if (a.texts.empty()) a.texts = stdin_lines();
  if (a.texts.empty()) brisk::cli::usage_fail("no documents (give them as arguments or lines on stdin)");
  if (a.yes_no != "auto" && a.yes_no != "on" && a.yes_no != "off") brisk::cli::usage_fail("--yes-no: auto, on or off");
  const brisk::YesNoMode yes_no = a.yes_no == "on" ? brisk::YesNoMode::on : a.yes_no == "off" ? brisk::YesNoMode::off
                                                                                            : brisk::YesNoMode::detect;
  auto model = load(a);
  brisk::Embedder e(model, {.device = a.device, .n_threads = a.threads, .n_batch = a.batch, .yes_no = yes_no,
                            .yes_id = -1, .no_id = -1, .instruction = a.instruction});
  if (e.n_cls() == 0)
    brisk::fail("the model has no classification head: it is an embedding model, not a reranker (a yes/no reranker "
                "that brisk does not recognise takes --yes-no on)");
  std::vector<brisk::EmbedInput> pairs;
  // A yes/no reranker's prompt body (query and document in their places) is tokenized as one text.
  const bool whole_text = e.yes_no() && !a.ids;
  for (size_t i = 0; whole_text && i < a.texts.size(); ++i)
    pairs.push_back(e.pair_text(a.query, a.texts[i], a.truncate, "document " + std::to_string(i)));
  const std::vector<int32_t> q = whole_text ? std::vector<int32_t>{} : a.ids ? parse_ids(a.query) : e.tokenize(a.query);
  for (size_t i = 0; !whole_text && i < a.texts.size(); ++i) {
    std::vector<int32_t> d = a.ids ? parse_ids(a.texts[i]) : e.tokenize(a.texts[i]);
    brisk::EmbedInput in = e.pair(q, d);
    if (in.ids.size() > size_t(e.max_tokens())) {
      if (!a.truncate)
        brisk::fail("document ", i, " with the query has ", in.ids.size(), " tokens, more than the model's maximum of ",
                    e.max_tokens(), " (--truncate cuts it)");
      const brisk::Tokenizer* tok = model->tokenizer();
      size_t trail = 0;
      while (tok && trail < d.size() && tok->is_special(d[d.size() - 1 - trail])) ++trail;
      const size_t over = in.ids.size() - size_t(e.max_tokens());
      if (over > d.size() - trail) brisk::fail("the query leaves no room for document ", i);
      d.erase(d.end() - int64_t(trail) - int64_t(over), d.end() - int64_t(trail));
      in = e.pair(q, d);
    }
    pairs.push_back(std::move(in));
  }
  const std::vector<std::vector<float>> s = e.classify(pairs);
  std::vector<std::pair<float, size_t>> order;
  for (size_t i = 0; i < s.size(); ++i) order.push_back({a.raw ? s[i][0] : e.relevance(s[i]), i});
  std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (const auto& [score, i] : order)
    std::printf("%s\n", nlohmann::json({{"index", i}, {"score", score}, {"document", a.texts[i]}}).dump().c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("embed", "text embeddings with an encoder model (JSON lines)", cmd_embed);
BRISK_COMMAND("rerank", "score documents against a query with a cross-encoder", cmd_rerank);
