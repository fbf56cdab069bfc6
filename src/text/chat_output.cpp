// Streaming chat output parser (see chat_output.h).
//
// A small state machine over the text:
//   content  --reasoning open-->  reasoning  --its close-->  content
//   content  --tool open------->  tool body  --its close (or, for open-ended blocks such as
//                                              Mistral's [TOOL_CALLS], the next open / end)--> content
//   content  --'{' first (Llama, Gemma)-->  bare JSON candidate  --object closed--> call or content
// In every mode the buffer is searched for the mode's markers; text before a marker is
// emitted, and only a suffix that is a proper prefix of some marker is held back. Content and
// reasoning are trimmed as a whole (leading whitespace dropped, trailing whitespace held back
// until more text follows), so the result does not depend on where the stream was split.
#include "text/chat_output.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "text/tool_call_parse.h"

namespace brisk {
namespace {

struct ReasoningSpec {
  std::string_view open, close;
};
struct ToolBlockSpec {
  std::string_view open, close;  // close empty: runs to the next tool open or the end
  ToolBodyKind kind;
};
struct FormatSpec {
  std::vector<ReasoningSpec> reasoning;
  std::vector<ToolBlockSpec> tools;
  std::vector<std::string_view> drop;  // markers removed from content
  bool bare_json = false;              // output starting with '{' may be a call
};

constexpr ReasoningSpec kThink{"<think>", "</think>"};

const FormatSpec& format_spec(ChatFormat f) {
  static const FormatSpec content_only{{kThink}, {}, {}, false};
  static const FormatSpec hermes{
      {kThink}, {{"<tool_call>", "</tool_call>", ToolBodyKind::kHermesJson}}, {}, false};
  static const FormatSpec qwen_xml{
      {kThink}, {{"<tool_call>", "</tool_call>", ToolBodyKind::kQwenXml}}, {}, false};
  static const FormatSpec llama3{
      {kThink}, {{"<|python_tag|>", "", ToolBodyKind::kLlamaTag}}, {}, true};
  static const FormatSpec mistral{{{"[THINK]", "[/THINK]"}, kThink},
                                  {{"[TOOL_CALLS]", "", ToolBodyKind::kMistral}},
                                  {},
                                  false};
  static const FormatSpec gemma{
      {kThink}, {{"```tool_code\n", "```", ToolBodyKind::kGemmaToolCode}}, {}, true};
  static const FormatSpec gemma4{{{"<|channel>thought", "<channel|>"}},
                                 {{"<|tool_call>call:", "<tool_call|>", ToolBodyKind::kGemma4}},
                                 {},
                                 false};
  static const FormatSpec deepseek{
      {kThink},
      {{"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", ToolBodyKind::kDeepSeek}},
      {},
      false};
  static const FormatSpec gpt_oss{
      {{"<|channel|>analysis<|message|>", "<|end|>"}},
      {{"<|start|>assistant to=", "<|call|>", ToolBodyKind::kGptOss},
       {"<|channel|>commentary to=", "<|call|>", ToolBodyKind::kGptOss},
       {" to=functions.", "<|call|>", ToolBodyKind::kGptOss}},
      {"<|start|>assistant", "<|channel|>final<|message|>", "<|end|>", "<|return|>"},
      false};
  switch (f) {
    case ChatFormat::kContentOnly: return content_only;
    case ChatFormat::kHermes: return hermes;
    case ChatFormat::kQwenXml: return qwen_xml;
    case ChatFormat::kLlama3: return llama3;
    case ChatFormat::kMistral: return mistral;
    case ChatFormat::kGemma: return gemma;
    case ChatFormat::kGemma4: return gemma4;
    case ChatFormat::kDeepSeek: return deepseek;
    case ChatFormat::kGptOss: return gpt_oss;
  }
  return content_only;
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

bool contains(std::string_view hay, std::string_view needle) {
  return hay.find(needle) != std::string_view::npos;
}

// Nine alphanumeric characters from the seed and the call index (FNV-1a, then base 62).
std::string make_call_id(const std::string& seed, size_t index) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    for (char c : s) {
      h ^= static_cast<uint8_t>(c);
      h *= 1099511628211ull;
    }
  };
  mix(seed);
  mix(":");
  mix(std::to_string(index));
  static constexpr char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id;
  for (int i = 0; i < 9; ++i) {
    id.push_back(kAlphabet[h % 62]);
    h = h / 62 + (h % 62) * 0x9E3779B97F4A7C15ull;  // keep all 9 characters varied
  }
  return id;
}

}  // namespace

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::kContentOnly: return "content_only";
    case ChatFormat::kHermes: return "hermes";
    case ChatFormat::kQwenXml: return "qwen_xml";
    case ChatFormat::kLlama3: return "llama3";
    case ChatFormat::kMistral: return "mistral";
    case ChatFormat::kGemma: return "gemma";
    case ChatFormat::kGemma4: return "gemma4";
    case ChatFormat::kDeepSeek: return "deepseek";
    case ChatFormat::kGptOss: return "gpt_oss";
  }
  return "content_only";
}

ChatFormat chat_format_from_name(std::string_view name) {
  for (ChatFormat f : {ChatFormat::kContentOnly, ChatFormat::kHermes, ChatFormat::kQwenXml,
                       ChatFormat::kLlama3, ChatFormat::kMistral, ChatFormat::kGemma,
                       ChatFormat::kGemma4, ChatFormat::kDeepSeek, ChatFormat::kGptOss}) {
    if (name == chat_format_name(f)) return f;
  }
  fail("unknown chat output format '", name,
       "' (expected content_only, hermes, qwen_xml, llama3, mistral, gemma, gemma4, deepseek "
       "or gpt_oss)");
}

ChatFormat chat_format_detect(std::string_view tpl, std::string_view family) {
  // Most specific markers first: several families share <tool_call>.
  if (contains(tpl, "<|tool_call>") || contains(tpl, "<|channel>")) return ChatFormat::kGemma4;
  if (contains(tpl, "tool▁call▁begin") || contains(tpl, "tool▁calls▁begin")) {
    return ChatFormat::kDeepSeek;
  }
  if (contains(tpl, "<|channel|>") && contains(tpl, "<|message|>")) return ChatFormat::kGptOss;
  if (contains(tpl, "[TOOL_CALLS]")) return ChatFormat::kMistral;
  if (contains(tpl, "<tool_call>") && contains(tpl, "<function=")) return ChatFormat::kQwenXml;
  if (contains(tpl, "<tool_call>")) return ChatFormat::kHermes;
  if (contains(tpl, "<|python_tag|>") ||
      (contains(tpl, "<|start_header_id|>") && contains(tpl, "\"parameters\""))) {
    return ChatFormat::kLlama3;
  }
  if (contains(tpl, "tool_code")) return ChatFormat::kGemma;

  std::string fam(family);
  std::transform(fam.begin(), fam.end(), fam.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto has = [&](std::string_view s) { return fam.find(s) != std::string::npos; };
  if (has("gemma4") || has("gemma-4") || has("gemma_4")) return ChatFormat::kGemma4;
  if (has("gemma")) return ChatFormat::kGemma;
  if (has("qwen3_5") || has("qwen3.5") || has("qwen35") || has("coder")) return ChatFormat::kQwenXml;
  if (has("qwen") || has("hermes")) return ChatFormat::kHermes;
  if (has("deepseek")) return ChatFormat::kDeepSeek;
  if (has("mistral") || has("ministral") || has("magistral")) return ChatFormat::kMistral;
  if (has("llama")) return ChatFormat::kLlama3;
  if (has("gpt_oss") || has("gpt-oss")) return ChatFormat::kGptOss;
  if (contains(tpl, "<start_of_turn>")) return ChatFormat::kGemma;
  return ChatFormat::kContentOnly;
}

std::string_view chat_prompt_reasoning_close(std::string_view prompt, ChatFormat format) {
  // Open when the last reasoning open marker has no close after it and only whitespace
  // (Gemma 4: the channel name) follows it.
  for (const ReasoningSpec& r : format_spec(format).reasoning) {
    const size_t open = prompt.rfind(r.open);
    if (open == std::string_view::npos) continue;
    const std::string_view after = prompt.substr(open + r.open.size());
    if (contains(after, r.close)) continue;
    if (std::all_of(after.begin(), after.end(), is_ws)) return r.close;
  }
  return {};
}

bool chat_prompt_opens_reasoning(std::string_view prompt, ChatFormat format) {
  return !chat_prompt_reasoning_close(prompt, format).empty();
}

// ---------------------------------------------------------------------------------------------

ChatOutputParser::ChatOutputParser(ChatOutputOptions options) : options_(std::move(options)) {
  const FormatSpec& spec = format_spec(options_.format);
  for (size_t i = 0; i < spec.reasoning.size(); ++i) {
    content_markers_.push_back({std::string(spec.reasoning[i].open), Marker::kReasoningOpen, i});
  }
  if (options_.parse_tool_calls) {
    for (size_t i = 0; i < spec.tools.size(); ++i) {
      content_markers_.push_back({std::string(spec.tools[i].open), Marker::kToolOpen, i});
    }
  }
  for (std::string_view d : spec.drop) content_markers_.push_back({std::string(d), Marker::kDrop, 0});
  if (options_.starts_in_reasoning && !spec.reasoning.empty()) {
    mode_ = Mode::kReasoning;
    block_ = 0;
  }
}

ChatOutputDelta ChatOutputParser::feed(std::string_view text) {
  BRISK_CHECK(!finished_, "chat output parser: feed() after finish()");
  ChatOutputDelta delta;
  buf_.append(text);
  process(delta, /*at_end=*/false);
  return delta;
}

ChatOutputDelta ChatOutputParser::finish() {
  ChatOutputDelta delta;
  if (finished_) return delta;
  process(delta, /*at_end=*/true);
  finished_ = true;
  // Trailing whitespace of content and reasoning is dropped.
  pending_ws_[0].clear();
  pending_ws_[1].clear();
  return delta;
}

void ChatOutputParser::emit_text(ChatOutputDelta& delta, std::string_view text, bool reasoning) {
  const int r = reasoning ? 1 : 0;
  if (!started_[r]) {
    size_t k = 0;
    while (k < text.size() && is_ws(text[k])) ++k;
    text.remove_prefix(k);
    if (text.empty()) return;
    started_[r] = true;
  }
  size_t last = text.size();
  while (last > 0 && is_ws(text[last - 1])) --last;
  if (last == 0) {
    pending_ws_[r].append(text);
    return;
  }
  std::string out = std::move(pending_ws_[r]);
  out.append(text.substr(0, last));
  pending_ws_[r].assign(text.substr(last));
  (reasoning ? delta.reasoning : delta.content) += out;
  (reasoning ? result_.reasoning : result_.content) += out;
  if (!reasoning) content_seen_ = true;
}

namespace {

// Appends to the delta's entry for `index` when it is the last one, else adds an entry.
ToolCallDelta& delta_entry(ChatOutputDelta& delta, size_t index) {
  if (delta.tool_calls.empty() || delta.tool_calls.back().index != index) {
    delta.tool_calls.push_back(ToolCallDelta{.index = index});
  }
  return delta.tool_calls.back();
}

}  // namespace

void ChatOutputParser::stream_call(ChatOutputDelta& delta, ToolBodyKind kind,
                                   std::string_view body) {
  if (!options_.stream_tool_calls) return;
  PartialToolCall p;
  tool_call_partial(kind, body, p, options_.tools);  // fields stay valid when it says false
  const size_t index = result_.tool_calls.size();
  if (p.has_name && !call_announced_) {
    ToolCallDelta& d = delta_entry(delta, index);
    d.id = p.id.empty() ? make_call_id(options_.id_seed, index) : p.id;
    d.name = p.name;
    announced_id_ = d.id;
    announced_name_ = d.name;
    call_announced_ = true;
    streamed_args_.clear();
    args_scanner_ = {};
    args_scanned_ = 0;
  }
  if (call_announced_ && p.arguments_prefix.size() > streamed_args_.size() &&
      p.arguments_prefix.compare(0, streamed_args_.size(), streamed_args_) == 0) {
    delta_entry(delta, index).arguments.append(p.arguments_prefix, streamed_args_.size());
    streamed_args_ = p.arguments_prefix;
  }
  if (call_announced_ && p.has_arguments) {
    // Until the object closes, every byte after its '{' belongs to it. The scanner has read
    // the first scanned_ bytes of the arguments already.
    const std::string_view args = body.substr(p.arguments_begin);
    if (args_scanned_ < args.size()) {
      args_scanner_.feed(args.substr(args_scanned_));
      args_scanned_ = args.size();
    }
    const size_t end = args_scanner_.span() != 0 ? args_scanner_.span() : args.size();
    if (end > streamed_args_.size()) {
      const std::string_view more = args.substr(streamed_args_.size(), end - streamed_args_.size());
      delta_entry(delta, index).arguments.append(more);
      streamed_args_.append(more);
    }
  }
}

void ChatOutputParser::add_calls(ChatOutputDelta& delta, std::vector<ParsedToolCall> calls) {
  for (size_t k = 0; k < calls.size(); ++k) {
    ParsedToolCall& c = calls[k];
    const size_t index = result_.tool_calls.size();
    ToolCall call{.id = c.id.empty() ? make_call_id(options_.id_seed, index) : c.id,
                  .name = std::move(c.name),
                  .arguments = std::move(c.arguments)};
    const bool continues = k == 0 && call_announced_ && call.id == announced_id_ &&
                           call.name == announced_name_ &&
                           call.arguments.compare(0, streamed_args_.size(), streamed_args_) == 0;
    if (continues) {
      if (call.arguments.size() > streamed_args_.size()) {  // the rest of the streamed call
        delta_entry(delta, index).arguments.append(call.arguments, streamed_args_.size());
      }
    } else {
      ToolCallDelta& d = delta_entry(delta, index);
      d.id = call.id;
      d.name = call.name;
      d.arguments = call.arguments;
    }
    result_.tool_calls.push_back(std::move(call));
  }
  call_announced_ = false;
  streamed_args_.clear();
  content_seen_ = true;
}

void ChatOutputParser::malformed(ChatOutputDelta& delta, std::string_view raw) {
  call_announced_ = false;
  streamed_args_.clear();
  emit_text(delta, raw, /*reasoning=*/false);
  delta.warning = true;
  result_.warning = true;
  content_seen_ = true;
}

void ChatOutputParser::close_tool_body(ChatOutputDelta& delta, std::string_view close) {
  const ToolBlockSpec& spec = format_spec(options_.format).tools[block_];
  std::vector<ParsedToolCall> calls;
  if (tool_call_parse_body(spec.kind, body_, options_.tools, calls)) {
    stream_call(delta, spec.kind, body_);  // announce now if no earlier piece did
    add_calls(delta, std::move(calls));
  } else {
    malformed(delta, std::string(spec.open) + body_ + std::string(close));
  }
  body_.clear();
  mode_ = Mode::kContent;
}

namespace {

// Earliest full occurrence of any marker in `buf` (the longest one at that position).
const ChatOutputParser::Marker* find_marker(std::string_view buf,
                                            const std::vector<ChatOutputParser::Marker>& markers,
                                            size_t& pos) {
  const ChatOutputParser::Marker* best = nullptr;
  pos = std::string_view::npos;
  for (const auto& m : markers) {
    const size_t p = buf.find(m.text);
    if (p == std::string_view::npos) continue;
    if (p < pos || (p == pos && m.text.size() > best->text.size())) {
      pos = p;
      best = &m;
    }
  }
  return best;
}

// True when the text from `pos` on is a proper prefix of a marker longer than `m` (a full
// match of "<|start|>assistant" that may still become "<|start|>assistant to="): wait.
bool could_grow(std::string_view buf, size_t pos, const ChatOutputParser::Marker& m,
                const std::vector<ChatOutputParser::Marker>& markers) {
  const std::string_view rest = buf.substr(pos);
  for (const auto& other : markers) {
    if (other.text.size() > rest.size() && other.text.size() > m.text.size() &&
        std::string_view(other.text).substr(0, rest.size()) == rest) {
      return true;
    }
  }
  return false;
}

// Length of the longest suffix of `buf` that is a proper prefix of some marker.
size_t holdback(std::string_view buf, const std::vector<ChatOutputParser::Marker>& markers) {
  size_t best = 0;
  for (const auto& m : markers) {
    const size_t max_k = std::min(buf.size(), m.text.size() - 1);
    for (size_t k = max_k; k > best; --k) {
      if (buf.substr(buf.size() - k) == std::string_view(m.text).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

}  // namespace

void ChatOutputParser::process(ChatOutputDelta& delta, bool at_end) {
  const FormatSpec& spec = format_spec(options_.format);
  while (true) {
    switch (mode_) {
      case Mode::kContent: {
        if (spec.bare_json && options_.parse_tool_calls && !content_seen_) {
          // Before any content: a leading '{' may open a bare JSON call.
          size_t k = 0;
          while (k < buf_.size() && is_ws(buf_[k])) ++k;
          buf_.erase(0, k);  // leading whitespace of content is dropped anyway
          if (buf_.empty()) return;
          if (buf_[0] == '{') {
            mode_ = Mode::kBareJson;
            body_.clear();
            continue;
          }
        }
        size_t pos;
        const Marker* m = find_marker(buf_, content_markers_, pos);
        if (m && !at_end && could_grow(buf_, pos, *m, content_markers_)) {
          emit_text(delta, std::string_view(buf_).substr(0, pos), false);
          buf_.erase(0, pos);
          return;
        }
        if (m) {
          emit_text(delta, std::string_view(buf_).substr(0, pos), false);
          buf_.erase(0, pos + m->text.size());
          if (m->kind == Marker::kReasoningOpen) {
            mode_ = Mode::kReasoning;
            block_ = m->index;
          } else if (m->kind == Marker::kToolOpen) {
            mode_ = Mode::kToolBody;
            block_ = m->index;
            body_.clear();
          }
          continue;
        }
        const size_t hold = at_end ? 0 : holdback(buf_, content_markers_);
        emit_text(delta, std::string_view(buf_).substr(0, buf_.size() - hold), false);
        buf_.erase(0, buf_.size() - hold);
        return;
      }

      case Mode::kReasoning: {
        // The block's close ends it; a repeated open marker (the prompt already opened the
        // block) is dropped.
        std::vector<Marker> markers = {
            {std::string(spec.reasoning[block_].close), Marker::kReasoningClose, block_}};
        for (const ReasoningSpec& r : spec.reasoning) {
          markers.push_back({std::string(r.open), Marker::kDrop, 0});
        }
        size_t pos;
        const Marker* m = find_marker(buf_, markers, pos);
        if (m && !at_end && could_grow(buf_, pos, *m, markers)) {
          emit_text(delta, std::string_view(buf_).substr(0, pos), true);
          buf_.erase(0, pos);
          return;
        }
        if (m) {
          emit_text(delta, std::string_view(buf_).substr(0, pos), true);
          buf_.erase(0, pos + m->text.size());
          if (m->kind == Marker::kReasoningClose) mode_ = Mode::kContent;
          continue;
        }
        const size_t hold = at_end ? 0 : holdback(buf_, markers);
        emit_text(delta, std::string_view(buf_).substr(0, buf_.size() - hold), true);
        buf_.erase(0, buf_.size() - hold);
        return;
      }

      case Mode::kToolBody: {
        const ToolBlockSpec& block = spec.tools[block_];
        std::vector<Marker> ends;
        if (!block.close.empty()) {
          ends.push_back({std::string(block.close), Marker::kToolClose, block_});
        } else {
          for (size_t i = 0; i < spec.tools.size(); ++i) {  // the next call starts here
            ends.push_back({std::string(spec.tools[i].open), Marker::kToolOpen, i});
          }
        }
        size_t pos;
        const Marker* m = find_marker(buf_, ends, pos);
        if (m && !at_end && could_grow(buf_, pos, *m, ends)) {
          body_.append(buf_, 0, pos);
          buf_.erase(0, pos);
          return;
        }
        if (m) {
          body_.append(buf_, 0, pos);
          if (m->kind == Marker::kToolClose) {
            buf_.erase(0, pos + m->text.size());
            close_tool_body(delta, block.close);
          } else {
            buf_.erase(0, pos);  // the open marker is read again in content mode
            close_tool_body(delta, "");
          }
          continue;
        }
        const size_t hold = at_end ? 0 : holdback(buf_, ends);
        body_.append(buf_, 0, buf_.size() - hold);
        buf_.erase(0, buf_.size() - hold);
        if (at_end) {
          close_tool_body(delta, "");  // unclosed: accepted only if it parses
        } else {
          stream_call(delta, block.kind, body_);
        }
        return;
      }

      case Mode::kBareJson: {
        const size_t old_size = body_.size();
        body_.append(buf_);
        buf_.clear();
        if (old_size == 0) bare_scanner_ = {};
        const size_t span = bare_scanner_.feed(std::string_view(body_).substr(old_size));
        if (span == 0 && !at_end && !bare_scanner_.failed()) {  // not closed yet
          stream_call(delta, ToolBodyKind::kBareJson, body_);
          return;
        }
        const std::string_view candidate =
            span != 0 ? std::string_view(body_).substr(0, span) : std::string_view(body_);
        std::vector<ParsedToolCall> calls;
        if (span != 0 &&
            tool_call_parse_body(ToolBodyKind::kBareJson, candidate, options_.tools, calls)) {
          stream_call(delta, ToolBodyKind::kBareJson, candidate);
          buf_ = body_.substr(span);
          body_.clear();
          add_calls(delta, std::move(calls));
          mode_ = Mode::kAfterBareCall;
          continue;
        }
        // Not a call: it was content all along. It is only a malformed call (warning) when it
        // began like one ({"name": "N", ...), which may have been streamed already.
        PartialToolCall p;
        tool_call_partial(ToolBodyKind::kBareJson, candidate, p);
        std::string text = std::move(body_);
        body_.clear();
        mode_ = Mode::kContent;
        content_seen_ = true;
        call_announced_ = false;
        streamed_args_.clear();
        if (p.has_name) {
          delta.warning = true;
          result_.warning = true;
        }
        buf_.insert(0, text);
        continue;
      }

      case Mode::kAfterBareCall: {
        // More calls may follow, separated by whitespace or ';'.
        size_t k = 0;
        while (k < buf_.size() && (is_ws(buf_[k]) || buf_[k] == ';')) ++k;
        if (k == buf_.size()) {
          if (at_end) buf_.clear();
          return;
        }
        if (buf_[k] == '{') {
          buf_.erase(0, k);
          mode_ = Mode::kBareJson;
          body_.clear();
          continue;
        }
        mode_ = Mode::kContent;
        continue;
      }
    }
  }
}

ChatOutput chat_output_parse(std::string_view text, const ChatOutputOptions& options) {
  ChatOutputParser parser(options);
  parser.feed(text);
  parser.finish();
  return parser.result();
}

}  // namespace brisk
