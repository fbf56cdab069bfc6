// Tool-call body readers (see tool_call_parse.h). Arguments keep the model's key order
// (ordered_json) and are re-serialized compactly.
#include "text/tool_call_parse.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>


namespace brisk {
namespace {

using ojson = nlohmann::ordered_json;

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::optional<ojson> parse_json(std::string_view s) {
  ojson j = ojson::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// Arguments given as an object, or as a string holding an object (some templates tojson the
// arguments string a second time); missing -> {}.
bool arguments_text(const ojson* args, std::string& out) {
  if (args == nullptr || args->is_null()) {
    out = "{}";
    return true;
  }
  if (args->is_object()) {
    out = args->dump();
    return true;
  }
  if (args->is_string()) {
    auto inner = parse_json(args->get<std::string>());
    if (inner && inner->is_object()) {
      out = inner->dump();
      return true;
    }
  }
  return false;
}

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > 256) return false;
  for (char c : name) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isspace(u) || c == '<' || c == '>' || c == '{' || c == '}' || c == '"') return false;
  }
  return true;
}

// {"name": N, "arguments"|"parameters": {...}, "id"?: ...}
bool call_from_object(const ojson& obj, ParsedToolCall& out) {
  if (!obj.is_object()) return false;
  auto name = obj.find("name");
  if (name == obj.end() || !name->is_string()) return false;
  out.name = name->get<std::string>();
  if (!valid_name(out.name)) return false;
  const ojson* args = nullptr;
  if (auto a = obj.find("arguments"); a != obj.end()) {
    args = &*a;
  } else if (auto p = obj.find("parameters"); p != obj.end()) {
    args = &*p;
  }
  if (!arguments_text(args, out.arguments)) return false;
  if (auto id = obj.find("id"); id != obj.end() && id->is_string()) out.id = id->get<std::string>();
  return true;
}

}  // namespace

size_t JsonObjectScanner::feed(std::string_view more) {
  if (span_ != 0 || failed_) return span_;
  for (size_t k = 0; k < more.size(); ++k, ++pos_) {
    const char c = more[k];
    if (pos_ == 0 && c != '{') {
      failed_ = true;
      return 0;
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      open_.push_back(c);
    } else if (c == '}' || c == ']') {
      if (open_.empty() || open_.back() != (c == '}' ? '{' : '[')) {
        failed_ = true;
        return 0;
      }
      open_.pop_back();
      if (open_.empty()) {
        span_ = pos_ + 1;
        ++pos_;
        return span_;
      }
    }
  }
  return 0;
}

size_t json_object_span(std::string_view s) {
  JsonObjectScanner scanner;
  return scanner.feed(s);
}

namespace {

// Splits `s` into consecutive top-level JSON objects separated by whitespace or ';'.
bool split_json_objects(std::string_view s, std::vector<std::string_view>& out) {
  size_t i = 0;
  while (true) {
    while (i < s.size() && (std::isspace(static_cast<unsigned char>(s[i])) || s[i] == ';')) ++i;
    if (i == s.size()) return !out.empty();
    const size_t n = json_object_span(s.substr(i));
    if (n == 0) return false;
    out.push_back(s.substr(i, n));
    i += n;
  }
}

// ---- Python literals (Gemma tool_code, Llama builtin calls) ---------------------------------

class PyReader {
 public:
  explicit PyReader(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    ws();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }
  bool identifier(std::string& out) {
    ws();
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
    out.assign(s_.substr(b, i_ - b));
    return !out.empty() && !std::isdigit(static_cast<unsigned char>(out[0]));
  }
  bool value(ojson& out, int depth = 0) {
    if (depth > 64) return false;
    ws();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string(out);
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++i_;
      out = ojson::array();
      while (!eat(close)) {
        ojson item;
        if (!value(item, depth + 1)) return false;
        out.push_back(std::move(item));
        if (!eat(',')) {
          if (!eat(close)) return false;
          break;
        }
      }
      return true;
    }
    if (c == '{') {
      ++i_;
      out = ojson::object();
      while (!eat('}')) {
        ojson key, item;
        if (!value(key, depth + 1) || !key.is_string() || !eat(':') || !value(item, depth + 1)) {
          return false;
        }
        out[key.get<std::string>()] = std::move(item);
        if (!eat(',')) {
          if (!eat('}')) return false;
          break;
        }
      }
      return true;
    }
    std::string word;
    const size_t b = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' ||
                              s_[i_] == '.' || s_[i_] == '-' || s_[i_] == '+')) {
      ++i_;
    }
    word.assign(s_.substr(b, i_ - b));
    if (word == "True" || word == "true") {
      out = true;
    } else if (word == "False" || word == "false") {
      out = false;
    } else if (word == "None" || word == "null") {
      out = nullptr;
    } else {
      return number(word, out);
    }
    return true;
  }

 private:
  static bool number(const std::string& w, ojson& out) {
    if (w.empty()) return false;
    if (auto j = parse_json(w); j && j->is_number()) {
      out = *j;
      return true;
    }
    char* end = nullptr;
    const double d = std::strtod(w.c_str(), &end);  // Python forms JSON lacks: "1.", ".5"
    if (end != w.c_str() + w.size() || !std::isfinite(d)) return false;
    out = d;
    return true;
  }
  bool string(ojson& out) {
    const char q = s_[i_++];
    std::string v;
    while (i_ < s_.size() && s_[i_] != q) {
      char c = s_[i_++];
      if (c == '\\' && i_ < s_.size()) {
        const char e = s_[i_++];
        switch (e) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '0': c = '\0'; break;
          default: c = e; break;  // \\ \' \" and unknown escapes keep the character
        }
      }
      v.push_back(c);
    }
    if (i_ >= s_.size()) return false;
    ++i_;
    out = v;  // invalid UTF-8 is replaced when the arguments are serialized
    return true;
  }
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

bool tool_call_python_kwargs_to_json(std::string_view kwargs, std::string& json_out) {
  PyReader r(kwargs);
  ojson obj = ojson::object();
  while (!r.at_end()) {
    std::string key;
    ojson value;
    if (!r.identifier(key) || !r.eat('=') || !r.value(value)) return false;
    obj[key] = std::move(value);
    if (!r.eat(',')) break;
  }
  if (!r.at_end()) return false;
  json_out = obj.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

namespace {

// N(k=v, ...) or N.call(k=v, ...) (Llama builtins: `with_call` accepts the ".call" suffix).
bool parse_python_call(std::string_view text, ParsedToolCall& out, bool with_call) {
  text = trim(text);
  const size_t open = text.find('(');
  if (open == std::string_view::npos || text.empty() || text.back() != ')') return false;
  std::string_view name = trim(text.substr(0, open));
  if (with_call && name.size() > 5 && name.substr(name.size() - 5) == ".call") {
    name.remove_suffix(5);
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') return false;
  }
  if (!valid_name(name)) return false;
  out.name.assign(name);
  return tool_call_python_kwargs_to_json(text.substr(open + 1, text.size() - open - 2), out.arguments);
}

// ---- Gemma 4 arguments ----------------------------------------------------------------------

constexpr std::string_view kGemmaQuote = "<|\"|>";

class Gemma4Reader {
 public:
  explicit Gemma4Reader(std::string_view s) : s_(s) {}
  bool members(ojson& obj, char close, int depth) {
    obj = ojson::object();
    while (true) {
      ws();
      if (i_ >= s_.size()) return close == 0;
      if (close != 0 && s_[i_] == close) {
        ++i_;
        return true;
      }
      std::string key;
      if (starts_with(s_.substr(i_), kGemmaQuote)) {
        if (!quoted(key)) return false;
      } else {
        const size_t b = i_;
        while (i_ < s_.size() && s_[i_] != ':') ++i_;
        key.assign(trim(s_.substr(b, i_ - b)));
      }
      ws();
      if (key.empty() || i_ >= s_.size() || s_[i_] != ':') return false;
      ++i_;
      ojson v;
      if (!value(v, depth + 1)) return false;
      obj[key] = std::move(v);
      ws();
      if (i_ < s_.size() && s_[i_] == ',') ++i_;
    }
  }
  bool at_end() {
    ws();
    return i_ == s_.size();
  }

 private:
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool quoted(std::string& out) {
    i_ += kGemmaQuote.size();
    const size_t end = s_.find(kGemmaQuote, i_);
    if (end == std::string_view::npos) return false;
    out.assign(s_.substr(i_, end - i_));
    i_ = end + kGemmaQuote.size();
    return true;
  }
  bool value(ojson& out, int depth) {
    if (depth > 64) return false;
    ws();
    if (i_ >= s_.size()) return false;
    if (starts_with(s_.substr(i_), kGemmaQuote)) {
      std::string v;
      if (!quoted(v)) return false;
      out = v;
      return true;
    }
    if (s_[i_] == '{') {
      ++i_;
      return members(out, '}', depth);
    }
    if (s_[i_] == '[') {
      ++i_;
      out = ojson::array();
      while (true) {
        ws();
        if (i_ >= s_.size()) return false;
        if (s_[i_] == ']') {
          ++i_;
          return true;
        }
        ojson item;
        if (!value(item, depth + 1)) return false;
        out.push_back(std::move(item));
        ws();
        if (i_ < s_.size() && s_[i_] == ',') ++i_;
      }
    }
    const size_t b = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != '}' && s_[i_] != ']') ++i_;
    const std::string_view word = trim(s_.substr(b, i_ - b));
    auto j = parse_json(word);
    if (!j || j->is_object() || j->is_array() || j->is_string()) return false;
    out = *j;
    return true;
  }
  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

bool tool_call_gemma4_args_to_json(std::string_view args, std::string& json_out) {
  Gemma4Reader r(args);
  ojson obj;
  if (!r.members(obj, 0, 0) || !r.at_end()) return false;
  json_out = obj.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

namespace {

// ---- Qwen XML -------------------------------------------------------------------------------

// The JSON-schema type of parameter `param` of tool `fn`, or "" when unknown.
std::string schema_type(const nlohmann::json& tools, const std::string& fn, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    const nlohmann::json& f = t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || f["name"] != fn) continue;
    const auto params = f.find("parameters");
    if (params == f.end() || !params->is_object()) return "";
    const auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return "";
    const auto p = props->find(param);
    if (p == props->end() || !p->is_object()) return "";
    const auto type = p->find("type");
    return type != p->end() && type->is_string() ? type->get<std::string>() : "";
  }
  return "";
}

// A parameter value: a string when the schema says so (or when it is no JSON), else JSON.
ojson qwen_xml_value(const nlohmann::json& tools, const std::string& fn, const std::string& param,
                     std::string_view v) {
  const std::string type = schema_type(tools, fn, param);
  std::optional<ojson> parsed;
  if (type != "string") parsed = parse_json(trim(v));
  if (parsed && (type.empty() ? !parsed->is_string() : true)) return std::move(*parsed);
  return ojson(std::string(v));
}

bool parse_qwen_xml(std::string_view body, const nlohmann::json& tools, ParsedToolCall& out) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>";
  constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>";
  body = trim(body);
  if (!starts_with(body, kFn)) return false;
  size_t i = kFn.size();
  const size_t gt = body.find('>', i);
  if (gt == std::string_view::npos) return false;
  out.name.assign(trim(body.substr(i, gt - i)));
  if (!valid_name(out.name)) return false;
  i = gt + 1;
  ojson args = ojson::object();
  while (true) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (starts_with(body.substr(i), kFnEnd)) {
      i += kFnEnd.size();
      break;
    }
    if (!starts_with(body.substr(i), kParam)) return false;
    i += kParam.size();
    const size_t pgt = body.find('>', i);
    if (pgt == std::string_view::npos) return false;
    const std::string pname(trim(body.substr(i, pgt - i)));
    if (pname.empty()) return false;
    i = pgt + 1;
    // The value runs to </parameter> (or, leniently, to the next parameter / function end).
    size_t end = body.find(kParamEnd, i);
    size_t next = end == std::string_view::npos ? std::string_view::npos : end + kParamEnd.size();
    for (std::string_view alt : {kParam, kFnEnd}) {
      const size_t a = body.find(alt, i);
      if (a != std::string_view::npos && (end == std::string_view::npos || a < end)) {
        end = a;
        next = a;
      }
    }
    if (end == std::string_view::npos) return false;
    std::string_view v = body.substr(i, end - i);
    if (starts_with(v, "\n")) v.remove_prefix(1);
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    args[pname] = qwen_xml_value(tools, out.name, pname, v);
    i = next;
  }
  if (!trim(body.substr(i)).empty()) return false;
  out.arguments = args.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return true;
}

// ---- DeepSeek -------------------------------------------------------------------------------

constexpr std::string_view kDsCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

bool parse_deepseek(std::string_view body, std::vector<ParsedToolCall>& out) {
  size_t i = 0;
  bool any = false;
  while (true) {
    const std::string_view rest = trim(body.substr(i));
    if (rest.empty()) return any;
    if (!starts_with(rest, kDsCallBegin)) return false;
    const size_t start = static_cast<size_t>(rest.data() - body.data()) + kDsCallBegin.size();
    const size_t end = body.find(kDsCallEnd, start);
    if (end == std::string_view::npos) return false;
    const std::string_view call = body.substr(start, end - start);
    const size_t sep = call.find(kDsSep);
    if (sep == std::string_view::npos) return false;
    std::string_view head = trim(call.substr(0, sep));
    std::string_view tail = call.substr(sep + kDsSep.size());
    ParsedToolCall pc;
    std::string_view args;
    if (head == "function" || tail.find("```") != std::string_view::npos) {
      // R1: function<sep>NAME\n```json\n{...}\n```
      const size_t nl = tail.find('\n');
      if (nl == std::string_view::npos) return false;
      pc.name.assign(trim(tail.substr(0, nl)));
      args = trim(tail.substr(nl + 1));
      if (starts_with(args, "```json")) args.remove_prefix(7);
      else if (starts_with(args, "```")) args.remove_prefix(3);
      args = trim(args);
      if (args.size() < 3 || args.substr(args.size() - 3) != "```") return false;
      args = trim(args.substr(0, args.size() - 3));
    } else {
      // V3.1: NAME<sep>{...}
      pc.name.assign(head);
      args = trim(tail);
    }
    if (!valid_name(pc.name)) return false;
    auto j = parse_json(args);
    if (!j || !arguments_text(&*j, pc.arguments)) return false;
    out.push_back(std::move(pc));
    any = true;
    i = end + kDsCallEnd.size();
  }
}

// ---- Mistral --------------------------------------------------------------------------------

bool parse_mistral(std::string_view body, std::vector<ParsedToolCall>& out) {
  body = trim(body);
  if (starts_with(body, "[")) {
    auto j = parse_json(body);
    if (!j || !j->is_array() || j->empty()) return false;
    for (const auto& item : *j) {
      ParsedToolCall pc;
      if (!call_from_object(item, pc)) return false;
      out.push_back(std::move(pc));
    }
    return true;
  }
  constexpr std::string_view kArgs = "[ARGS]", kCallId = "[CALL_ID]";
  const size_t a = body.find(kArgs);
  if (a == std::string_view::npos) return false;
  ParsedToolCall pc;
  std::string_view head = body.substr(0, a);
  if (const size_t c = head.find(kCallId); c != std::string_view::npos) {
    pc.id.assign(trim(head.substr(c + kCallId.size())));
    head = head.substr(0, c);
  }
  pc.name.assign(trim(head));
  if (!valid_name(pc.name)) return false;
  auto j = parse_json(trim(body.substr(a + kArgs.size())));
  if (!j || !arguments_text(&*j, pc.arguments)) return false;
  out.push_back(std::move(pc));
  return true;
}

// ---- gpt-oss --------------------------------------------------------------------------------

bool parse_gpt_oss(std::string_view body, std::vector<ParsedToolCall>& out) {
  // functions.NAME[ <|channel|>commentary][ <|constrain|>json]<|message|>{...}
  constexpr std::string_view kFunctions = "functions.", kMessage = "<|message|>";
  body = trim(body);
  if (starts_with(body, kFunctions)) body.remove_prefix(kFunctions.size());
  const size_t msg = body.find(kMessage);
  if (msg == std::string_view::npos) return false;
  std::string_view head = body.substr(0, msg);
  size_t name_end = 0;
  while (name_end < head.size() && !std::isspace(static_cast<unsigned char>(head[name_end])) &&
         head[name_end] != '<') {
    ++name_end;
  }
  ParsedToolCall pc;
  pc.name.assign(head.substr(0, name_end));
  if (!valid_name(pc.name)) return false;
  auto j = parse_json(trim(body.substr(msg + kMessage.size())));
  if (!j || !arguments_text(&*j, pc.arguments)) return false;
  out.push_back(std::move(pc));
  return true;
}

}  // namespace

namespace {

// Cursor over a body that may still be incomplete: expect() answers kMatch, kMismatch, or
// kNeedMore when the body ends inside the expected text.
class PartialCursor {
 public:
  enum Result { kMatch, kMismatch, kNeedMore };
  explicit PartialCursor(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  Result expect(std::string_view lit) {
    ws();
    const size_t n = std::min(lit.size(), s_.size() - i_);
    if (s_.substr(i_, n) != lit.substr(0, n)) return kMismatch;
    if (n < lit.size()) return kNeedMore;
    i_ += n;
    return kMatch;
  }
  size_t pos() const { return i_; }
  void set_pos(size_t i) { i_ = i; }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }

 private:
  std::string_view s_;
  size_t i_ = 0;
};

// {"name": "N", "arguments"|"parameters": {   (keys in this order, name without escapes)
bool partial_json_call(std::string_view body, PartialToolCall& out) {
  PartialCursor c(body);
  for (std::string_view lit : {"{", "\"name\"", ":", "\""}) {
    const auto r = c.expect(lit);
    if (r != PartialCursor::kMatch) return r == PartialCursor::kNeedMore;
  }
  const size_t name_begin = c.pos();
  const size_t quote = body.find('"', name_begin);
  if (quote == std::string_view::npos) {
    return body.substr(name_begin).find('\\') == std::string_view::npos;
  }
  const std::string_view name = body.substr(name_begin, quote - name_begin);
  if (name.find('\\') != std::string_view::npos || !valid_name(name)) return false;
  out.has_name = true;
  out.name.assign(name);
  c.set_pos(quote + 1);
  for (std::string_view lit : {",", "\""}) {
    const auto r = c.expect(lit);
    if (r != PartialCursor::kMatch) return r == PartialCursor::kNeedMore;
  }
  const size_t key = c.pos();
  auto r = c.expect("arguments\"");
  if (r == PartialCursor::kMismatch) {
    c.set_pos(key);
    r = c.expect("parameters\"");
  }
  if (r != PartialCursor::kMatch) return r == PartialCursor::kNeedMore;
  r = c.expect(":");
  if (r != PartialCursor::kMatch) return r == PartialCursor::kNeedMore;
  c.ws();
  if (c.at_end()) return true;
  if (c.peek() != '{') return false;
  out.has_arguments = true;
  out.arguments_begin = c.pos();
  return true;
}

// Name, then "{" and each parameter closed by </parameter> as the final serialization writes
// it. Stops (keeping what it has) at anything the strict form does not expect.
bool partial_qwen_xml(std::string_view body, const nlohmann::json& tools, PartialToolCall& out) {
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>";
  constexpr std::string_view kParam = "<parameter=", kParamEnd = "</parameter>";
  PartialCursor c(body);
  const auto r = c.expect(kFn);
  if (r != PartialCursor::kMatch) return r == PartialCursor::kNeedMore;
  size_t i = c.pos();
  const size_t gt = body.find('>', i);
  if (gt == std::string_view::npos) return true;
  const std::string_view name = trim(body.substr(i, gt - i));
  if (!valid_name(name)) return false;
  out.has_name = true;
  out.name.assign(name);
  std::string prefix = "{";
  std::vector<std::string> seen;
  i = gt + 1;
  while (true) {
    while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
    if (!starts_with(body.substr(i), kParam)) break;
    const size_t pgt = body.find('>', i + kParam.size());
    if (pgt == std::string_view::npos) break;
    const std::string pname(trim(body.substr(i + kParam.size(), pgt - i - kParam.size())));
    if (pname.empty() || std::find(seen.begin(), seen.end(), pname) != seen.end()) break;
    const size_t end = body.find(kParamEnd, pgt + 1);
    if (end == std::string_view::npos) break;
    const std::string_view raw = body.substr(pgt + 1, end - pgt - 1);
    if (raw.find(kParam) != std::string_view::npos || raw.find(kFnEnd) != std::string_view::npos) {
      break;  // the lenient reading would end this value early: leave it to the final parse
    }
    std::string_view v = raw;
    if (starts_with(v, "\n")) v.remove_prefix(1);
    if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    if (!seen.empty()) prefix += ",";
    prefix += ojson(pname).dump(-1, ' ', false, ojson::error_handler_t::replace);
    prefix += ":";
    prefix += qwen_xml_value(tools, out.name, pname, v)
                  .dump(-1, ' ', false, ojson::error_handler_t::replace);
    seen.push_back(pname);
    i = end + kParamEnd.size();
  }
  out.arguments_prefix = std::move(prefix);
  return true;
}

}  // namespace

bool tool_call_partial(ToolBodyKind kind, std::string_view body, PartialToolCall& out,
                       const nlohmann::json& tools) {
  out = PartialToolCall{};
  switch (kind) {
    case ToolBodyKind::kQwenXml:
      return partial_qwen_xml(body, tools, out);
    case ToolBodyKind::kHermesJson:
    case ToolBodyKind::kBareJson:
      return partial_json_call(body, out);
    case ToolBodyKind::kMistral: {
      constexpr std::string_view kArgs = "[ARGS]", kCallId = "[CALL_ID]";
      const std::string_view t = trim(body);
      if (starts_with(t, "[")) return false;  // the JSON list form
      const size_t a = body.find(kArgs);
      if (a == std::string_view::npos) return body.size() < 512;
      std::string_view head = body.substr(0, a);
      if (const size_t c = head.find(kCallId); c != std::string_view::npos) {
        out.id.assign(trim(head.substr(c + kCallId.size())));
        head = head.substr(0, c);
      }
      const std::string_view name = trim(head);
      if (!valid_name(name)) return false;
      out.has_name = true;
      out.name.assign(name);
      size_t i = a + kArgs.size();
      while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
      if (i == body.size()) return true;
      if (body[i] != '{') return false;
      out.has_arguments = true;
      out.arguments_begin = i;
      return true;
    }
    case ToolBodyKind::kGptOss: {
      constexpr std::string_view kFunctions = "functions.", kMessage = "<|message|>";
      size_t b = 0;
      while (b < body.size() && std::isspace(static_cast<unsigned char>(body[b]))) ++b;
      if (body.substr(b, kFunctions.size()) == kFunctions) b += kFunctions.size();
      const size_t msg = body.find(kMessage, b);
      if (msg == std::string_view::npos) return body.size() < 512;
      size_t e = b;
      while (e < msg && !std::isspace(static_cast<unsigned char>(body[e])) && body[e] != '<') ++e;
      const std::string_view name = body.substr(b, e - b);
      if (!valid_name(name)) return false;
      out.has_name = true;
      out.name.assign(name);
      size_t i = msg + kMessage.size();
      while (i < body.size() && std::isspace(static_cast<unsigned char>(body[i]))) ++i;
      if (i == body.size()) return true;
      if (body[i] != '{') return false;
      out.has_arguments = true;
      out.arguments_begin = i;
      return true;
    }
    default:
      return false;
  }
}

namespace {

// For the streamable forms: replace the re-serialized arguments by the verbatim object text
// when the body has the streamable shape (so the streamed fragments add up to it).
void use_verbatim_arguments(ToolBodyKind kind, std::string_view body, ParsedToolCall& pc) {
  PartialToolCall p;
  if (!tool_call_partial(kind, body, p) || !p.has_arguments || p.name != pc.name) return;
  const std::string_view args = body.substr(p.arguments_begin);
  // The whole body parsed, so this balanced span is the arguments value itself.
  const size_t span = json_object_span(args);
  if (span == 0) return;
  pc.arguments.assign(args.substr(0, span));
}

}  // namespace

bool tool_call_parse_body(ToolBodyKind kind, std::string_view body, const nlohmann::json& tools,
                          std::vector<ParsedToolCall>& out) {
  std::vector<ParsedToolCall> calls;
  switch (kind) {
    case ToolBodyKind::kHermesJson:
    case ToolBodyKind::kBareJson: {
      auto j = parse_json(trim(body));
      ParsedToolCall pc;
      if (!j || !call_from_object(*j, pc)) return false;
      use_verbatim_arguments(kind, body, pc);
      calls.push_back(std::move(pc));
      break;
    }
    case ToolBodyKind::kQwenXml: {
      ParsedToolCall pc;
      if (!parse_qwen_xml(body, tools, pc)) return false;
      calls.push_back(std::move(pc));
      break;
    }
    case ToolBodyKind::kLlamaTag: {
      std::string_view b = trim(body);
      for (std::string_view end : {"<|eom_id|>", "<|eot_id|>"}) {
        if (b.size() >= end.size() && b.substr(b.size() - end.size()) == end) {
          b = trim(b.substr(0, b.size() - end.size()));
        }
      }
      if (starts_with(b, "{")) {
        std::vector<std::string_view> objects;
        if (!split_json_objects(b, objects)) return false;
        for (std::string_view o : objects) {
          auto j = parse_json(o);
          ParsedToolCall pc;
          if (!j || !call_from_object(*j, pc)) return false;
          calls.push_back(std::move(pc));
        }
      } else {
        ParsedToolCall pc;
        if (!parse_python_call(b, pc, /*with_call=*/true)) {
          if (b.empty()) return false;
          // Plain code after the tag is a call of the code interpreter builtin.
          pc.name = "code_interpreter";
          pc.arguments = ojson{{"code", std::string(b)}}.dump(-1, ' ', false,
                                                              ojson::error_handler_t::replace);
        }
        calls.push_back(std::move(pc));
      }
      break;
    }
    case ToolBodyKind::kMistral:
      if (!parse_mistral(body, calls)) return false;
      if (calls.size() == 1) use_verbatim_arguments(kind, body, calls[0]);
      break;
    case ToolBodyKind::kGemmaToolCode: {
      std::string_view b = trim(body);
      if (b.empty()) return false;
      size_t i = 0;
      while (i < b.size()) {
        size_t nl = b.find('\n', i);
        if (nl == std::string_view::npos) nl = b.size();
        const std::string_view line = trim(b.substr(i, nl - i));
        if (!line.empty()) {
          ParsedToolCall pc;
          if (!parse_python_call(line, pc, /*with_call=*/false)) return false;
          calls.push_back(std::move(pc));
        }
        i = nl + 1;
      }
      break;
    }
    case ToolBodyKind::kGemma4: {
      std::string_view b = trim(body);
      const size_t brace = b.find('{');
      if (brace == std::string_view::npos || b.back() != '}') return false;
      ParsedToolCall pc;
      pc.name.assign(trim(b.substr(0, brace)));
      if (!valid_name(pc.name)) return false;
      if (!tool_call_gemma4_args_to_json(b.substr(brace + 1, b.size() - brace - 2), pc.arguments)) {
        return false;
      }
      calls.push_back(std::move(pc));
      break;
    }
    case ToolBodyKind::kDeepSeek:
      if (!parse_deepseek(body, calls)) return false;
      break;
    case ToolBodyKind::kGptOss:
      if (!parse_gpt_oss(body, calls)) return false;
      use_verbatim_arguments(kind, body, calls[0]);
      break;
  }
  out.insert(out.end(), calls.begin(), calls.end());
  return !calls.empty();
}

}  // namespace brisk
