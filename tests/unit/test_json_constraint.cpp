// JSON recognizer against nlohmann::json (differential, with mutations), prefix semantics,
// options, the tool-call constraint and the token mask against a brute-force check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/json_constraint.h"
#include "runtime/tool_call_constraint.h"
#include "runtime/sampler.h"
#include "text/chat_output.h"

using namespace brisk;

namespace {

const std::vector<std::string> kValidDocs = {
    R"({})",
    R"([])",
    R"({"a": 1, "b": [true, false, null], "c": {"d": "e"}})",
    R"(  {"name":"get_weather","arguments":{"city":"Paris","days":3}}  )",
    R"([0, -0, 1.5, -2.25e10, 3E-2, 4e+7, 1234567890, 0.0])",
    R"("plain string")",
    R"("esc \" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00")",
    "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"",
    R"(123)",
    R"(-0.5e-3)",
    R"(true)",
    R"(null)",
    R"([[[[{"x":[{}]}]]]])",
    "{\n  \"k\" : [ 1 , 2 ] ,\n  \"v\" : { }\n}\n",
};

const std::vector<std::string> kInvalidDocs = {
    "", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "1.", "-", "1e", "1e+",
    "tru", "nul", "[1 2]", "\"\\x\"", "\"\\u12G4\"", "\"\\uDC00\"", "\"\\uD800\"",
    "\"\\uD800\\u0041\"", "\"\x01\"", "\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\xF5\x80\x80\x80\"",
    "\"\xE2\x82\"", "{}}", "[]]", "{} {}", "'a'", "[1]x", "{\"a\":1]", "[1}", "+1", ".5",
};

bool full_match(const std::string& s, JsonConstraintOptions opt = {}) {
  JsonConstraint c(opt);
  return c.accepts(s) && [&] {
    c.advance(s);
    return c.complete();
  }();
}

}  // namespace

TEST(JsonConstraint, AcceptsValidDocumentsAndEveryPrefix) {
  for (const std::string& doc : kValidDocs) {
    EXPECT_TRUE(nlohmann::json::accept(doc)) << doc;  // the corpus itself is valid
    EXPECT_TRUE(full_match(doc)) << doc;
    JsonConstraint c;
    for (size_t i = 0; i < doc.size(); ++i) {
      ASSERT_TRUE(c.accepts(doc.substr(i, 1))) << doc << " at byte " << i;
      c.advance(doc.substr(i, 1));
    }
    EXPECT_TRUE(c.complete()) << doc;
  }
}

TEST(JsonConstraint, RejectsInvalidDocuments) {
  for (const std::string& doc : kInvalidDocs) {
    EXPECT_FALSE(nlohmann::json::accept(doc)) << doc;
    EXPECT_FALSE(full_match(doc)) << doc;
  }
}

TEST(JsonConstraint, PrefixesAreAcceptedButIncomplete) {
  JsonConstraint c;
  EXPECT_TRUE(c.accepts("{\"a\": [1, 2"));
  c.advance("{\"a\": [1, 2");
  EXPECT_FALSE(c.complete());
  EXPECT_FALSE(c.accepts("}"));  // the array is still open
  EXPECT_TRUE(c.accepts("]}"));
  c.advance("]}");
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.accepts("  \n"));
  EXPECT_FALSE(c.accepts(","));
  EXPECT_THROW(c.advance("x"), Error);
  EXPECT_TRUE(c.complete());  // a rejected advance leaves the state as it was
}

TEST(JsonConstraint, UnicodeEscapeDigitsAreCheckedOneByOne) {
  JsonConstraint c;
  c.advance("\"\\u");
  EXPECT_TRUE(c.accepts("D8"));   // may become a high surrogate
  EXPECT_FALSE(c.accepts("DC"));  // can only become a lone low surrogate
  c.advance("D83D");
  EXPECT_FALSE(c.accepts("x"));
  EXPECT_TRUE(c.accepts("\\uDE"));
  EXPECT_FALSE(c.accepts("\\uD8"));  // a second high surrogate
}

TEST(JsonConstraint, DifferentialAgainstNlohmannOnMutations) {
  std::mt19937_64 rng(20261129);
  const std::string alphabet = "{}[]\":,.-+0123456789eEtrufalsn \n\\/u\x01\x7f\xC3\xA9\xED\xF0";
  int disagreements = 0, checked = 0;
  for (int round = 0; round < 4000; ++round) {
    std::string s = kValidDocs[rng() % kValidDocs.size()];
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t pos = rng() % s.size();
      const char c = alphabet[rng() % alphabet.size()];
      switch (rng() % 3) {
        case 0: s[pos] = c; break;
        case 1: s.insert(s.begin() + static_cast<std::ptrdiff_t>(pos), c); break;
        default: s.erase(pos, 1); break;
      }
    }
    const bool ours = full_match(s);
    bool ref = nlohmann::json::accept(s);
    // nlohmann rejects numbers outside the double range (e.g. 1e999); the grammar allows them.
    try {
      const auto parsed = nlohmann::json::parse(s);
      (void)parsed;
    } catch (const nlohmann::json::parse_error& e) {
      if (std::string(e.what()).find("number overflow") != std::string::npos) ref = true;
    } catch (const nlohmann::json::out_of_range&) {
      ref = true;
    }
    if (ours != ref) {
      ++disagreements;
      ADD_FAILURE() << "disagreement on [" << s << "]: ours " << ours << ", nlohmann " << ref;
      if (disagreements > 5) break;
    }
    ++checked;
  }
  EXPECT_EQ(disagreements, 0) << "over " << checked << " mutated documents";
}

TEST(JsonConstraint, Options) {
  JsonConstraintOptions obj{.require_object = true};
  EXPECT_TRUE(full_match("{\"a\":[1]}", obj));
  EXPECT_FALSE(JsonConstraint(obj).accepts("["));
  EXPECT_FALSE(JsonConstraint(obj).accepts("\"s\""));
  EXPECT_FALSE(JsonConstraint(obj).accepts("1"));
  EXPECT_TRUE(JsonConstraint(obj).accepts("  {"));

  JsonConstraintOptions shallow{.max_depth = 3};
  EXPECT_TRUE(full_match("[[[1]]]", shallow));
  EXPECT_FALSE(JsonConstraint(shallow).accepts("[[[["));

  JsonConstraintOptions ws{.max_whitespace_run = 2};
  EXPECT_TRUE(full_match("{ \n\"a\"  :  \"x     y\"}", ws));  // spaces in strings do not count
  EXPECT_FALSE(JsonConstraint(ws).accepts("{   "));

  EXPECT_THROW(JsonConstraint(JsonConstraintOptions{.max_depth = 0}), Error);
  EXPECT_THROW(JsonConstraint(JsonConstraintOptions{.max_depth = 1000}), Error);
}

TEST(JsonConstraint, DeepNestingUpToTheLimit) {
  JsonConstraintOptions opt{.max_depth = 256};
  std::string doc(256, '[');
  doc += std::string(256, ']');
  EXPECT_TRUE(full_match(doc, opt));
  EXPECT_FALSE(JsonConstraint(opt).accepts(std::string(257, '[')));
}

namespace {

ToolCallSyntax hermes() {
  return ToolCallSyntax{.before_name = "<tool_call>\n{\"name\": \"",
                        .between_name_and_arguments = "\", \"arguments\": ",
                        .after_arguments = "}\n</tool_call>"};
}

}  // namespace

TEST(ToolCallConstraint, ForcesHermesCallWithAllowedName) {
  ToolCallConstraint c(hermes(), {"get_weather", "get_time"});
  const std::string call =
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>";
  EXPECT_TRUE(c.accepts(call));
  EXPECT_FALSE(c.accepts("Sure"));  // content first is not allowed
  EXPECT_FALSE(c.accepts("<tool_call>\n{\"name\": \"get_x"));
  EXPECT_FALSE(c.accepts("<tool_call>\n{\"name\": \"get_time2"));
  EXPECT_FALSE(c.accepts("<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]"));
  c.advance(call.substr(0, 40));
  EXPECT_FALSE(c.complete());
  c.advance(call.substr(40));
  EXPECT_TRUE(c.complete());
  EXPECT_FALSE(c.accepts("x"));
  EXPECT_THROW(ToolCallConstraint(hermes(), {}), Error);
}

TEST(ToolCallConstraint, NamedChoiceAllowsOnlyThatName) {
  ToolCallConstraint c(hermes(), {"get_weather"});
  EXPECT_FALSE(c.accepts("<tool_call>\n{\"name\": \"get_time\""));
  EXPECT_TRUE(c.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
}

namespace {

// A small vocabulary with structural pieces, words, partial UTF-8 and an end token.
std::vector<std::string> test_vocab() {
  return {"",      "{",     "}",      "[",      "]",      "\"",     ":",       ",",    " ",
          "\n",    "{\"",   "\":",    "\",",    "\"}",    "}}",     "true",    "fal",  "se",
          "null",  "0",     "1",      "23",     "-",      ".",      "e",       "5.",   "a",
          "name",  " the",  "\\",     "\\n",    "\\u",    "00e9",   "D83D",    "\xC3", "\xA9",
          "\xC3\xA9", "\xF0\x9F", "\x98\x80", "<tool_call>", "\n{\"name\": \"", "get", "_time",
          "get_time", "\", \"arguments\": ", "}\n</tool_call>", "<|end|>", " {", "tr", "ue", "DE00", "u"};
}

template <class C>
void expect_mask_matches_brute_force(const TokenMask& mask, const C& c,
                                     const std::vector<std::string>& vocab, int32_t end_id,
                                     const std::string& where) {
  std::vector<bool> allowed;
  mask.compute(c, allowed);
  ASSERT_EQ(allowed.size(), vocab.size());
  for (size_t i = 0; i < vocab.size(); ++i) {
    bool expect = !vocab[i].empty() && c.accepts(vocab[i]);
    if (static_cast<int32_t>(i) == end_id) expect = c.complete();
    EXPECT_EQ(allowed[i], expect) << "token " << i << " [" << vocab[i] << "] after [" << where
                                  << "]";
  }
}

}  // namespace

TEST(TokenMask, MatchesBruteForceAlongDocuments) {
  const auto vocab = test_vocab();
  const int32_t end_id = 46;
  ASSERT_EQ(vocab[end_id], "<|end|>");
  TokenMask mask(vocab, {end_id});
  for (const std::string& doc : kValidDocs) {
    JsonConstraint c;
    for (size_t i = 0; i <= doc.size(); ++i) {
      expect_mask_matches_brute_force(mask, c, vocab, end_id, doc.substr(0, i));
      if (i < doc.size()) c.advance(doc.substr(i, 1));
    }
  }
}

TEST(TokenMask, ToolCallConstraintMatchesBruteForce) {
  const auto vocab = test_vocab();
  TokenMask mask(vocab, {46});
  const std::string call =
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"a\": [1, \"\xC3\xA9\"]}}\n</tool_call>";
  ToolCallConstraint c(hermes(), {"get_time", "get_weather"});
  for (size_t i = 0; i <= call.size(); ++i) {
    expect_mask_matches_brute_force(mask, c, vocab, 46, call.substr(0, i));
    if (i < call.size()) c.advance(call.substr(i, 1));
  }
  EXPECT_TRUE(c.complete());
}

TEST(TokenMask, ConstrainedSamplingProducesParseableObjects) {
  // Random logits through the mask and the sampler: every finished text is a JSON object.
  const auto vocab = test_vocab();
  const int32_t end_id = 46;
  TokenMask mask(vocab, {end_id});
  int finished = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    JsonConstraint c(JsonConstraintOptions{.require_object = true, .max_whitespace_run = 4});
    Sampler sampler(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                                  .seed = seed},
                    static_cast<int32_t>(vocab.size()));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::string text;
    std::vector<bool> allowed;
    for (int step = 0; step < 300; ++step) {
      std::vector<float> logits(vocab.size());
      for (float& l : logits) l = noise(rng);
      logits[2] += 2.0f;   // "}" : nudge towards closing so most runs finish
      logits[4] += 2.0f;   // "]"
      logits[5] += 1.0f;   // "\""
      logits[end_id] += 5.0f;
      mask.compute(c, allowed);
      ASSERT_NE(std::count(allowed.begin(), allowed.end(), true), 0) << "dead end after " << text;
      const int32_t tok = sampler.sample(logits.data(), &allowed);
      if (tok == end_id) break;
      ASSERT_TRUE(c.accepts(vocab[static_cast<size_t>(tok)]));
      c.advance(vocab[static_cast<size_t>(tok)]);
      text += vocab[static_cast<size_t>(tok)];
    }
    if (c.complete()) {
      ++finished;
      const auto parsed = nlohmann::json::parse(text, nullptr, false);
      ASSERT_FALSE(parsed.is_discarded()) << text;
      EXPECT_TRUE(parsed.is_object()) << text;
    }
  }
  EXPECT_GT(finished, 20);
}

TEST(TokenMask, RejectsBadEndToken) {
  EXPECT_THROW(TokenMask({"a", "b"}, {2}), Error);
}

TEST(ToolCallConstraint, SyntaxOfEachFormatRoundTripsThroughTheParser) {
  for (ChatFormat f : {ChatFormat::kHermes, ChatFormat::kMistral, ChatFormat::kLlama3,
                       ChatFormat::kGemma, ChatFormat::kDeepSeek, ChatFormat::kGptOss}) {
    SCOPED_TRACE(chat_format_name(f));
    const ToolCallSyntax syn = tool_call_syntax(f);
    const std::string text = syn.before_name + "get_weather" + syn.between_name_and_arguments +
                             "{\"city\": \"Paris\", \"days\": [1, 2]}" + syn.after_arguments;
    ToolCallConstraint c(syn, {"get_weather", "search"});
    ASSERT_TRUE(c.accepts(text));
    c.advance(text);
    EXPECT_TRUE(c.complete());
    const ChatOutput out = chat_output_parse(text, {.format = f});
    ASSERT_EQ(out.tool_calls.size(), 1u);
    EXPECT_EQ(out.tool_calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(out.tool_calls[0].arguments),
              nlohmann::json::parse("{\"city\": \"Paris\", \"days\": [1, 2]}"));
    EXPECT_EQ(out.content, "");
  }
  EXPECT_THROW(tool_call_syntax(ChatFormat::kQwenXml), Error);
  EXPECT_THROW(tool_call_syntax(ChatFormat::kContentOnly), Error);
}

TEST(ToolCallConstraint, FreeTextUntilReasoningCloses) {
  ToolCallSyntax syn = tool_call_syntax(ChatFormat::kHermes);
  syn.free_text_until = "</think>";
  ToolCallConstraint c(syn, {"search"});
  EXPECT_TRUE(c.accepts("anything </thin at all"));
  EXPECT_FALSE(c.accepts("done</think>\nHello"));
  EXPECT_FALSE(c.accepts("done</think>\n\n<tool_call>\n{\"name\": \"get"));
  const std::string text =
      "Need to search.</think>\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>";
  ASSERT_TRUE(c.accepts(text));
  c.advance(text);
  EXPECT_TRUE(c.complete());
}

TEST(ToolCallConstraint, ConstrainedSamplingAlwaysYieldsACall) {
  // Byte-level vocabulary plus a few longer pieces; random logits through mask and sampler.
  std::vector<std::string> vocab;
  for (int b = 0x20; b < 0x7F; ++b) vocab.emplace_back(1, static_cast<char>(b));
  for (const char* piece : {"\n", "<tool_call>", "\n{\"name\": \"", "get_weather", "search", "\"}",
                            "\", \"arguments\": ", "}\n</tool_call>", "{\"", "\": ", "\xC3\xA9"}) {
    vocab.emplace_back(piece);
  }
  vocab.emplace_back("<|im_end|>");
  const int32_t end_id = static_cast<int32_t>(vocab.size()) - 1;
  TokenMask mask(vocab, {end_id});
  const ToolCallSyntax syn = tool_call_syntax(ChatFormat::kHermes);
  int done = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    ToolCallConstraint c(syn, {"get_weather", "search"});
    Sampler sampler(SamplerParams{.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                                  .seed = seed},
                    static_cast<int32_t>(vocab.size()));
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> noise(0.0f, 1.0f);
    std::string text;
    std::vector<bool> allowed;
    for (int step = 0; step < 400; ++step) {
      std::vector<float> logits(vocab.size());
      for (float& l : logits) l = noise(rng);
      logits['}' - 0x20] += 3.0f;  // favour closing so that most runs finish
      logits['"' - 0x20] += 1.5f;
      logits[static_cast<size_t>(end_id)] += 5.0f;
      mask.compute(c, allowed);
      const int32_t tok = sampler.sample(logits.data(), &allowed);
      if (tok == end_id) break;
      c.advance(vocab[static_cast<size_t>(tok)]);
      text += vocab[static_cast<size_t>(tok)];
    }
    if (!c.complete()) continue;
    ++done;
    const ChatOutput out = chat_output_parse(text, {.format = ChatFormat::kHermes});
    ASSERT_EQ(out.tool_calls.size(), 1u) << text;
    EXPECT_TRUE(out.tool_calls[0].name == "get_weather" || out.tool_calls[0].name == "search");
    EXPECT_FALSE(out.warning) << text;
    EXPECT_EQ(out.content, "") << text;
  }
  EXPECT_GT(done, 10);
}

TEST(TokenMask, FreeTextPhaseMatchesBruteForce) {
  auto vocab = test_vocab();
  vocab.push_back("</think>");
  vocab.push_back("</th");
  vocab.push_back("ink>\n\n");
  TokenMask mask(vocab, {46});
  ToolCallSyntax syn = hermes();
  syn.free_text_until = "</think>";
  ToolCallConstraint c(syn, {"get_time"});
  const std::string text =
      "ok </thi then</think>\n\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t i = 0; i <= text.size(); ++i) {
    expect_mask_matches_brute_force(mask, c, vocab, 46, text.substr(0, i));
    if (i < text.size()) c.advance(text.substr(i, 1));
  }
  EXPECT_TRUE(c.complete());
}
