// Python text forms used by the Jinja engine: float repr, str repr, json.dumps; and the lexer's
// whitespace handling at token level. Expected strings are what CPython 3 prints.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/value.h"

namespace brisk::jinja {
namespace {

TEST(JinjaValues, FloatReprMatchesPython) {
  EXPECT_EQ(py_float_repr(0.1), "0.1");
  EXPECT_EQ(py_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(py_float_repr(1e16), "1e+16");
  EXPECT_EQ(py_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(py_float_repr(123456789.125), "123456789.125");
  EXPECT_EQ(py_float_repr(0.0001), "0.0001");
  EXPECT_EQ(py_float_repr(0.00001), "1e-05");
  EXPECT_EQ(py_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(py_float_repr(2.5e100), "2.5e+100");
  EXPECT_EQ(py_float_repr(-2.0), "-2.0");
  EXPECT_EQ(py_float_repr(-0.0), "-0.0");
  EXPECT_EQ(py_float_repr(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(py_float_repr(std::nan("")), "nan");
  EXPECT_EQ(py_float_repr(5e-324), "5e-324");
}

TEST(JinjaValues, StringReprMatchesPython) {
  auto repr = [](const std::string& s) {
    std::string out;
    py_string_repr(out, s);
    return out;
  };
  EXPECT_EQ(repr("abc"), "'abc'");
  EXPECT_EQ(repr("it's"), "\"it's\"");
  EXPECT_EQ(repr("both ' \""), "'both \\' \"'");
  EXPECT_EQ(repr("a\nb\t\\"), "'a\\nb\\t\\\\'");
  EXPECT_EQ(repr("\x01\x7f"), "'\\x01\\x7f'");
  EXPECT_EQ(repr("é日本🙂"), "'é日本🙂'");
  EXPECT_EQ(repr("\u200b\u00a0\u2028"), "'\\u200b\\xa0\\u2028'");
}

TEST(JinjaValues, StrOfContainers) {
  auto d = std::make_shared<Dict>();
  d->set(Value("k"), Value::list({Value(int64_t(1)), Value(2.5), Value::none(), Value(true)}));
  d->set(Value(int64_t(3)), Value::list({Value("x")}, true));
  EXPECT_EQ(Value(d).str(), "{'k': [1, 2.5, None, True], 3: ('x',)}");
  EXPECT_EQ(Value::undefined().str(), "");
}

TEST(JinjaValues, JsonDumpsMatchesPython) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(
      R"({"b": [1, 2.0, null, true, "x\"y\n"], "a": {}, "c": [], "é": "\u0001\u007f"})");
  Value v = from_json(j);
  EXPECT_EQ(json_dumps(v, {}), "{\"b\": [1, 2.0, null, true, \"x\\\"y\\n\"], \"a\": {}, \"c\": [], \"é\": \"\\u0001\x7f\"}");
  EXPECT_EQ(json_dumps(v, {.indent = "  "}),
            "{\n  \"b\": [\n    1,\n    2.0,\n    null,\n    true,\n    \"x\\\"y\\n\"\n  ],\n  \"a\": {},\n  \"c\": [],\n"
            "  \"é\": \"\\u0001\x7f\"\n}");
  EXPECT_EQ(json_dumps(v, {.ensure_ascii = true, .item_separator = ",", .key_separator = ":", .sort_keys = true}),
            "{\"a\":{},\"b\":[1,2.0,null,true,\"x\\\"y\\n\"],\"c\":[],\"\\u00e9\":\"\\u0001\x7f\"}");
  EXPECT_EQ(json_dumps(Value("🙂"), {.ensure_ascii = true}), "\"\\ud83d\\ude42\"");
  EXPECT_THROW(json_dumps(Value::undefined(), {}), Error);
}

TEST(JinjaValues, EqualityAndOrderFollowPython) {
  EXPECT_TRUE(values_equal(Value(int64_t(1)), Value(1.0)));
  EXPECT_TRUE(values_equal(Value(true), Value(int64_t(1))));
  EXPECT_FALSE(values_equal(Value("1"), Value(int64_t(1))));
  EXPECT_FALSE(values_equal(Value::list({}), Value::list({}, true)));  // [] != ()
  EXPECT_LT(values_compare(Value("a"), Value("b")), 0);
  EXPECT_LT(values_compare(Value::list({Value(int64_t(1))}), Value::list({Value(int64_t(1)), Value(int64_t(0))})), 0);
  EXPECT_THROW(values_compare(Value("a"), Value(int64_t(1))), Error);
}

TEST(JinjaLexer, TokensCarryLineAndColumn) {
  auto toks = lex("ab\n  {{ x|f }}", {});
  ASSERT_GE(toks.size(), 6u);
  EXPECT_EQ(toks[0].kind, TokenKind::data);
  EXPECT_EQ(toks[0].text, "ab\n  ");
  EXPECT_EQ(toks[1].kind, TokenKind::variable_begin);
  EXPECT_EQ(toks[1].pos.line, 2u);
  EXPECT_EQ(toks[1].pos.column, 3u);
  EXPECT_EQ(toks[2].text, "x");
  EXPECT_EQ(toks[2].pos.column, 6u);
  EXPECT_EQ(toks[3].text, "|");
  EXPECT_EQ(toks.back().kind, TokenKind::eof);
}

TEST(JinjaLexer, StringEscapesFollowPython) {
  auto toks = lex(R"({{ 'a\n\t\x41\u00e9\U0001F642\'\q' }})", {});
  ASSERT_EQ(toks[1].kind, TokenKind::string);
  EXPECT_EQ(toks[1].text, "a\n\tAé🙂'\\q");
}

TEST(JinjaLexer, BracesInsideTagsDoNotEndThem) {
  auto toks = lex("{{ {'a': {'b': 1}} }}", {});
  EXPECT_EQ(toks[toks.size() - 2].kind, TokenKind::variable_end);
  EXPECT_THROW(lex("{{ x ]}}", {}), Error);
  EXPECT_THROW(lex("{# never closed", {}), Error);
}

}  // namespace
}  // namespace brisk::jinja
