// Chat output parsing: fixtures rendered from the real templates (rendered.json, made by
// tests/fixtures/chat_output/make_fixtures.py) and written by hand (handwritten.json), parsed
// whole and streamed split at every byte; format detection; argument converters.
#include <gtest/gtest.h>

#include "required_assets.h"

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/chat_output.h"
#include "text/tool_call_parse.h"

using namespace brisk;
using nlohmann::json;

namespace {

struct Fixture {
  std::string name;
  std::string template_file;  // rendered fixtures only
  ChatOutputOptions options;
  std::string text;
  json expected;
};

std::vector<Fixture> load_fixtures(const std::string& file) {
  const std::string path = std::string(BRISK_FIXTURES) + "/chat_output/" + file;
  std::ifstream in(path);
  if (!in) throw Error(str_cat("cannot open fixture file ", path));
  const json doc = json::parse(in);
  std::vector<Fixture> out;
  for (const json& f : doc.at("fixtures")) {
    Fixture fx;
    fx.name = f.at("name");
    fx.template_file = f.value("template", "");
    fx.options.format = chat_format_from_name(f.at("format").get<std::string>());
    if (f.contains("prompt_tail")) {
      fx.options.starts_in_reasoning =
          chat_prompt_opens_reasoning(f.at("prompt_tail").get<std::string>(), fx.options.format);
    } else {
      fx.options.starts_in_reasoning = f.value("starts_in_reasoning", false);
    }
    fx.options.parse_tool_calls = f.value("parse_tool_calls", true);
    fx.options.id_seed = "fixture";
    fx.text = f.at("text");
    fx.expected = f.at("expected");
    out.push_back(std::move(fx));
  }
  return out;
}

std::vector<Fixture> all_fixtures() {
  auto a = load_fixtures("rendered.json");
  auto b = load_fixtures("handwritten.json");
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

void expect_matches(const ChatOutput& got, const Fixture& fx) {
  const json& e = fx.expected;
  EXPECT_EQ(got.content, e.at("content").get<std::string>()) << fx.name;
  EXPECT_EQ(got.reasoning, e.at("reasoning").get<std::string>()) << fx.name;
  EXPECT_EQ(got.warning, e.value("warning", false)) << fx.name;
  const json& calls = e.at("tool_calls");
  ASSERT_EQ(got.tool_calls.size(), calls.size()) << fx.name;
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, calls[i].at("name").get<std::string>()) << fx.name;
    const json args = json::parse(got.tool_calls[i].arguments, nullptr, false);
    ASSERT_FALSE(args.is_discarded()) << fx.name << ": " << got.tool_calls[i].arguments;
    EXPECT_EQ(args, calls[i].at("arguments")) << fx.name;
    if (calls[i].contains("id")) {
      EXPECT_EQ(got.tool_calls[i].id, calls[i]["id"].get<std::string>()) << fx.name;
    } else {
      EXPECT_FALSE(got.tool_calls[i].id.empty()) << fx.name;
    }
  }
}

bool same(const ChatOutput& a, const ChatOutput& b) {
  if (a.content != b.content || a.reasoning != b.reasoning || a.warning != b.warning ||
      a.tool_calls.size() != b.tool_calls.size()) {
    return false;
  }
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    if (a.tool_calls[i].id != b.tool_calls[i].id || a.tool_calls[i].name != b.tool_calls[i].name ||
        a.tool_calls[i].arguments != b.tool_calls[i].arguments) {
      return false;
    }
  }
  return true;
}

// Feeds `chunks` and rebuilds the output from the deltas alone.
ChatOutput parse_chunks(const ChatOutputOptions& options, const std::vector<std::string>& chunks,
                        ChatOutput& from_deltas) {
  ChatOutputParser p(options);
  auto take = [&](const ChatOutputDelta& d) {
    from_deltas.content += d.content;
    from_deltas.reasoning += d.reasoning;
    from_deltas.warning = from_deltas.warning || d.warning;
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.index == from_deltas.tool_calls.size()) from_deltas.tool_calls.push_back({});
      ToolCall& c = from_deltas.tool_calls.at(t.index);
      if (!t.id.empty()) c.id = t.id;
      c.name += t.name;
      c.arguments += t.arguments;
    }
  };
  for (const std::string& c : chunks) take(p.feed(c));
  take(p.finish());
  return p.result();
}

// The deltas added up equal the result, except that a malformed call whose name was already
// streamed stays in the deltas as an abandoned call (content, reasoning and warning agree).
bool deltas_agree(const ChatOutput& from_deltas, const ChatOutput& whole) {
  if (!whole.warning) return same(from_deltas, whole);
  return from_deltas.content == whole.content && from_deltas.reasoning == whole.reasoning &&
         from_deltas.warning;
}

std::string describe(const ChatOutput& o) {
  std::ostringstream os;
  os << "content=[" << o.content << "] reasoning=[" << o.reasoning << "] warning=" << o.warning;
  for (const auto& c : o.tool_calls) os << " call{" << c.id << "," << c.name << "," << c.arguments << "}";
  return os.str();
}

}  // namespace

TEST(ChatOutput, FixturesParseWhole) {
  const auto fixtures = all_fixtures();
  ASSERT_GE(fixtures.size(), 60u);
  for (const Fixture& fx : fixtures) {
    SCOPED_TRACE(fx.name);
    expect_matches(chat_output_parse(fx.text, fx.options), fx);
  }
}

TEST(ChatOutput, StreamedSplitAtEveryByteGivesTheSameResult) {
  for (const Fixture& fx : all_fixtures()) {
    const ChatOutput whole = chat_output_parse(fx.text, fx.options);
    for (size_t i = 0; i <= fx.text.size(); ++i) {
      ChatOutput from_deltas;
      const ChatOutput got =
          parse_chunks(fx.options, {fx.text.substr(0, i), fx.text.substr(i)}, from_deltas);
      ASSERT_TRUE(same(got, whole)) << fx.name << " split at " << i << "\n got: " << describe(got)
                                    << "\nwant: " << describe(whole);
      ASSERT_TRUE(deltas_agree(from_deltas, whole)) << fx.name << " split at " << i
                                            << " (deltas)\n got: " << describe(from_deltas);
    }
  }
}

TEST(ChatOutput, StreamedByteByByteAndRandomChunks) {
  std::mt19937_64 rng(7);
  for (const Fixture& fx : all_fixtures()) {
    const ChatOutput whole = chat_output_parse(fx.text, fx.options);
    std::vector<std::string> bytes;
    for (char c : fx.text) bytes.emplace_back(1, c);
    ChatOutput from_deltas;
    ASSERT_TRUE(same(parse_chunks(fx.options, bytes, from_deltas), whole)) << fx.name;
    ASSERT_TRUE(deltas_agree(from_deltas, whole)) << fx.name << "\n got: " << describe(from_deltas);
    for (int round = 0; round < 10; ++round) {
      std::vector<std::string> chunks;
      for (size_t i = 0; i < fx.text.size();) {
        const size_t n = 1 + rng() % 7;
        chunks.push_back(fx.text.substr(i, n));
        i += n;
      }
      ChatOutput d;
      ASSERT_TRUE(same(parse_chunks(fx.options, chunks, d), whole)) << fx.name;
      ASSERT_TRUE(deltas_agree(d, whole)) << fx.name;
    }
  }
}

TEST(ChatOutput, HoldsBackOnlyPossibleMarkerPrefixes) {
  ChatOutputParser p({.format = ChatFormat::kHermes, .stream_tool_calls = false});
  EXPECT_EQ(p.feed("Hello wor").content, "Hello wor");
  EXPECT_EQ(p.feed("ld <to").content, "ld");  // " " waits for more text, "<to" may be a marker
  EXPECT_EQ(p.feed("day>").content, " <today>");
  auto d = p.feed("<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_ca");
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.feed("ll> bye");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "f");
  EXPECT_EQ(d.tool_calls[0].arguments, "{}");
  EXPECT_EQ(d.content, " bye");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_THROW(p.feed("x"), Error);
}

TEST(ChatOutput, StreamsCallNameThenArgumentFragments) {
  struct Case {
    ChatFormat format;
    std::string text;
  };
  const std::vector<Case> cases = {
      {ChatFormat::kHermes,
       "<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\", "
       "\"text\": \"line 1\\nline 2 with } and {\"}}\n</tool_call>"},
      {ChatFormat::kLlama3,
       "{\"name\": \"write_file\", \"parameters\": {\"path\": \"a.txt\", \"text\": \"}{\"}}"},
      {ChatFormat::kMistral, "[TOOL_CALLS]write_file[ARGS]{\"path\": \"a.txt\", \"text\": \"x\"}"},
      {ChatFormat::kGptOss,
       "<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>"
       "{\"path\": \"a.txt\", \"text\": \"x\"}<|call|>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(chat_format_name(c.format));
    ChatOutputParser p({.format = c.format});
    std::string args;
    int name_at = -1, fragments = 0;
    for (size_t i = 0; i < c.text.size(); ++i) {
      const ChatOutputDelta d = p.feed(c.text.substr(i, 1));
      for (const ToolCallDelta& t : d.tool_calls) {
        EXPECT_EQ(t.index, 0u);
        if (!t.name.empty()) {
          EXPECT_EQ(name_at, -1);
          EXPECT_EQ(t.name, "write_file");
          EXPECT_EQ(t.id.size(), 9u);
          name_at = static_cast<int>(i);
        }
        if (!t.arguments.empty()) ++fragments;
        args += t.arguments;
      }
    }
    for (const ToolCallDelta& t : p.finish().tool_calls) args += t.arguments;
    ASSERT_EQ(p.result().tool_calls.size(), 1u);
    EXPECT_EQ(args, p.result().tool_calls[0].arguments);
    EXPECT_GT(fragments, 10);                                  // arrived piece by piece
    EXPECT_LT(name_at, static_cast<int>(c.text.size()) - 20);  // long before the call closed
    EXPECT_FALSE(nlohmann::json::parse(args, nullptr, false).is_discarded()) << args;
  }
}

TEST(ChatOutput, StreamsXmlCallParameterByParameter) {
  const std::string text =
      "<think>\nplan\n</think>\n\n<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n"
      "</parameter>\n<parameter=text>\nline 1\nline \"2\"\n</parameter>\n<parameter=n>\n3\n"
      "</parameter>\n</function>\n</tool_call>";
  ChatOutputParser p({.format = ChatFormat::kQwenXml});
  std::string args;
  std::vector<size_t> fragment_at;
  size_t name_at = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    for (const ToolCallDelta& t : p.feed(text.substr(i, 1)).tool_calls) {
      if (!t.name.empty()) name_at = i;
      if (!t.arguments.empty()) fragment_at.push_back(i);
      args += t.arguments;
    }
  }
  for (const ToolCallDelta& t : p.finish().tool_calls) args += t.arguments;
  ASSERT_EQ(p.result().tool_calls.size(), 1u);
  EXPECT_EQ(args, p.result().tool_calls[0].arguments);
  EXPECT_EQ(json::parse(args), json::parse(R"({"path":"a.txt","text":"line 1\nline \"2\"","n":3})"));
  EXPECT_EQ(name_at, text.find("<function=write_file>") + 20);  // at its '>'
  // "{" with the name, one fragment per closed parameter, "}" when the call closes.
  ASSERT_EQ(fragment_at.size(), 5u);
  EXPECT_EQ(fragment_at[0], name_at);
  EXPECT_EQ(fragment_at[1], text.find("</parameter>") + 11);
}

TEST(ChatOutput, CallIdsAreStableAndDistinct) {
  const std::string text =
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>";
  const auto r1 = chat_output_parse(text, {.format = ChatFormat::kHermes, .id_seed = "req-1"});
  const auto r2 = chat_output_parse(text, {.format = ChatFormat::kHermes, .id_seed = "req-2"});
  ASSERT_EQ(r1.tool_calls.size(), 2u);
  EXPECT_EQ(r1.tool_calls[0].id.size(), 9u);
  EXPECT_NE(r1.tool_calls[0].id, r1.tool_calls[1].id);
  EXPECT_NE(r1.tool_calls[0].id, r2.tool_calls[0].id);
  EXPECT_EQ(r1.tool_calls[0].id, chat_output_parse(text, {.format = ChatFormat::kHermes,
                                                          .id_seed = "req-1"}).tool_calls[0].id);
  EXPECT_EQ(r1.tool_calls[1].arguments, "{}");  // missing arguments -> empty object
}

TEST(ChatOutput, DetectsFormatFromTemplates) {
  const std::filesystem::path dir = std::filesystem::path(BRISK_SHARED_DATA) / "templates";
  if (!std::filesystem::exists(dir)) BRISK_SKIP_MISSING_ASSET() << "shared templates not found at " << dir;
  int checked = 0;
  for (const Fixture& fx : load_fixtures("rendered.json")) {
    std::ifstream in(dir / fx.template_file);
    ASSERT_TRUE(in) << fx.template_file;
    std::stringstream ss;
    ss << in.rdbuf();
    EXPECT_EQ(chat_format_name(chat_format_detect(ss.str())), chat_format_name(fx.options.format))
        << fx.template_file;
    ++checked;
  }
  EXPECT_GT(checked, 20);
}

TEST(ChatOutput, DetectsFormatFromFamilyWhenTemplateIsSilent) {
  EXPECT_EQ(chat_format_detect("", "qwen3"), ChatFormat::kHermes);
  EXPECT_EQ(chat_format_detect("", "qwen3_5_moe"), ChatFormat::kQwenXml);
  EXPECT_EQ(chat_format_detect("", "llama"), ChatFormat::kLlama3);
  EXPECT_EQ(chat_format_detect("", "gemma3"), ChatFormat::kGemma);
  EXPECT_EQ(chat_format_detect("", "gemma4"), ChatFormat::kGemma4);
  EXPECT_EQ(chat_format_detect("", "mistral"), ChatFormat::kMistral);
  EXPECT_EQ(chat_format_detect("", "deepseek2"), ChatFormat::kDeepSeek);
  EXPECT_EQ(chat_format_detect("", "rwkv"), ChatFormat::kContentOnly);
  EXPECT_EQ(chat_format_detect("{{ '<tool_call>' }}", "llama"), ChatFormat::kHermes);
  EXPECT_THROW(chat_format_from_name("nope"), Error);
}

TEST(ChatOutput, PromptOpensReasoning) {
  EXPECT_TRUE(chat_prompt_opens_reasoning("<|im_start|>assistant\n<think>\n", ChatFormat::kHermes));
  EXPECT_FALSE(chat_prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n",
                                           ChatFormat::kHermes));
  EXPECT_FALSE(chat_prompt_opens_reasoning("<|im_start|>assistant\n", ChatFormat::kHermes));
  EXPECT_FALSE(chat_prompt_opens_reasoning("<think>x</think><|im_start|>assistant\n<think>\nabc",
                                           ChatFormat::kHermes));
  EXPECT_FALSE(chat_prompt_opens_reasoning("<|turn>model\n<|channel>thought\n<channel|>",
                                           ChatFormat::kGemma4));
  EXPECT_TRUE(chat_prompt_opens_reasoning("<|turn>model\n<|channel>thought\n", ChatFormat::kGemma4));
}

TEST(ToolCallParse, PythonKwargs) {
  std::string out;
  ASSERT_TRUE(tool_call_python_kwargs_to_json(
      "a=1, b='x\\'y', c=[1, 2.5, -3e2], d={'k': None, \"t\": True}, e=(1,)", out));
  EXPECT_EQ(json::parse(out), json::parse(R"({"a":1,"b":"x'y","c":[1,2.5,-300.0],"d":{"k":null,"t":true},"e":[1]})"));
  ASSERT_TRUE(tool_call_python_kwargs_to_json("", out));
  EXPECT_EQ(out, "{}");
  EXPECT_FALSE(tool_call_python_kwargs_to_json("1=2", out));
  EXPECT_FALSE(tool_call_python_kwargs_to_json("a=", out));
  EXPECT_FALSE(tool_call_python_kwargs_to_json("a='open", out));
  EXPECT_FALSE(tool_call_python_kwargs_to_json("a=foo(1)", out));
  EXPECT_FALSE(tool_call_python_kwargs_to_json(std::string(200, '[') , out));
}

TEST(ToolCallParse, Gemma4Arguments) {
  std::string out;
  ASSERT_TRUE(tool_call_gemma4_args_to_json(
      "q:<|\"|>x, \"y\"<|\"|>,n:2,o:{<|\"|>k k<|\"|>:[true,null]}", out));
  EXPECT_EQ(json::parse(out), json::parse(R"({"q":"x, \"y\"","n":2,"o":{"k k":[true,null]}})"));
  EXPECT_FALSE(tool_call_gemma4_args_to_json("q:<|\"|>unterminated", out));
  EXPECT_FALSE(tool_call_gemma4_args_to_json("q:bare words", out));
}

TEST(ToolCallParse, QwenXmlUsesSchemaTypes) {
  const json tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{
      "type":"object","properties":{"zip":{"type":"string"},"n":{"type":"integer"}}}}}])");
  const std::string body = "<function=f>\n<parameter=zip>\n01234\n</parameter>\n"
                           "<parameter=n>\n7\n</parameter>\n<parameter=other>\n5\n</parameter>\n</function>";
  std::vector<ParsedToolCall> calls;
  ASSERT_TRUE(tool_call_parse_body(ToolBodyKind::kQwenXml, body, tools, calls));
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(json::parse(calls[0].arguments), json::parse(R"({"zip":"01234","n":7,"other":5})"));
  calls.clear();
  ASSERT_TRUE(tool_call_parse_body(ToolBodyKind::kQwenXml,
                                   "<function=f>\n<parameter=zip>\n123\n</parameter>\n</function>",
                                   json(), calls));
  EXPECT_EQ(json::parse(calls[0].arguments), json::parse(R"({"zip":123})"));  // no schema: a number
}

TEST(ToolCallParse, RejectsMalformedBodies) {
  std::vector<ParsedToolCall> calls;
  const json none;
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kHermesJson, "{\"arguments\": {}}", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kHermesJson, "{\"name\": \"a b\"}", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kHermesJson, "{\"name\": \"f\", \"arguments\": 3}", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kHermesJson, "[1]", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kMistral, "[]", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kDeepSeek, "<｜tool▁call▁begin｜>f", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kGemma4, "f{a:1", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kGptOss, "functions.f", none, calls));
  EXPECT_FALSE(tool_call_parse_body(ToolBodyKind::kLlamaTag, "   ", none, calls));
  EXPECT_TRUE(calls.empty());
}

TEST(ToolCallParse, JsonObjectSpan) {
  EXPECT_EQ(json_object_span("{\"a\": \"}\"} tail"), 10u);
  EXPECT_EQ(json_object_span("{\"a\": [1, {\"b\": 2}]}"), 20u);
  EXPECT_EQ(json_object_span("{\"a\": \"\\\"}\""), 0u);  // still inside the string
  EXPECT_EQ(json_object_span("x{}"), 0u);
  EXPECT_EQ(json_object_span("{]"), 0u);
  // Fed in pieces, the scanner finds the same end.
  const std::string doc = "{\"a\": \"x}\\\"{\", \"b\": [1, {\"c\": []}]} trailing {";
  const size_t whole = json_object_span(doc);
  ASSERT_GT(whole, 0u);
  for (size_t cut = 0; cut <= doc.size(); ++cut) {
    JsonObjectScanner sc;
    size_t got = sc.feed(doc.substr(0, cut));
    if (got == 0) got = sc.feed(doc.substr(cut));
    EXPECT_EQ(got, whole) << "cut at " << cut;
  }
  JsonObjectScanner bad;
  EXPECT_EQ(bad.feed("{[}"), 0u);
  EXPECT_TRUE(bad.failed());
}

TEST(ChatOutput, RandomTextNeverThrowsAndSplitsAgree) {
  // Random mixes of every format's markers, JSON pieces and bytes: no exception, and streaming
  // in random chunks gives the whole-text result.
  const std::vector<std::string> pieces = {
      "<think>", "</think>", "<tool_call>", "</tool_call>", "<function=f>", "<parameter=p>",
      "</parameter>", "</function>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "[THINK]",
      "[/THINK]", "```tool_code\n", "```", "<|channel>thought", "<channel|>", "<|tool_call>call:",
      "<tool_call|>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
      "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "<|channel|>analysis<|message|>", "<|end|>",
      "<|start|>assistant", " to=functions.", "<|call|>", "{\"name\": \"f\", \"arguments\": {",
      "}", "{", "\"", "\n", " ", "a", "f(x=1)", "<", "<|", "\xC3", "\xA9", "\xFF", ";", "[", "]"};
  std::mt19937_64 rng(99);
  for (ChatFormat f : {ChatFormat::kContentOnly, ChatFormat::kHermes, ChatFormat::kQwenXml,
                       ChatFormat::kLlama3, ChatFormat::kMistral, ChatFormat::kGemma,
                       ChatFormat::kGemma4, ChatFormat::kDeepSeek, ChatFormat::kGptOss}) {
    for (int round = 0; round < 150; ++round) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 24);
      for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
      const ChatOutputOptions opt{.format = f, .starts_in_reasoning = (rng() % 4) == 0};
      ChatOutput whole;
      ASSERT_NO_THROW(whole = chat_output_parse(text, opt)) << text;
      std::vector<std::string> chunks;
      for (size_t i = 0; i < text.size();) {
        const size_t len = 1 + rng() % 5;
        chunks.push_back(text.substr(i, len));
        i += len;
      }
      ChatOutput from_deltas;
      const ChatOutput streamed = parse_chunks(opt, chunks, from_deltas);
      ASSERT_TRUE(same(streamed, whole)) << chat_format_name(f) << ": [" << text << "]\n got: "
                                         << describe(streamed) << "\nwant: " << describe(whole);
      ASSERT_TRUE(deltas_agree(from_deltas, whole)) << chat_format_name(f) << ": [" << text << "]";
      for (const ToolCall& c : whole.tool_calls) {
        EXPECT_FALSE(json::parse(c.arguments, nullptr, false).is_discarded()) << c.arguments;
      }
    }
  }
}
