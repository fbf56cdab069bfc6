// JSON Schema constraint: conforming and non-conforming documents per keyword, prefixes,
// compile errors, random walks checked by an independent validator of the enforced subset,
// and the token mask against a brute-force check.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/json_constraint.h"
#include "runtime/schema_constraint.h"

using namespace brisk;
using nlohmann::json;

namespace {

bool full_match(const json& schema, const std::string& doc) {
  SchemaConstraint c(compile_json_schema(schema));
  if (!c.accepts(doc)) return false;
  c.advance(doc);
  return c.complete();
}

struct Case {
  const char* schema;
  std::vector<std::string> valid;
  std::vector<std::string> invalid;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> k = {
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
       {R"({"a":1})", R"({"a":-20,"b":"x"})", R"({"b":"x","a":0})", R"( { "a" : 5 , "b" : "" } )"},
       {R"({})", R"({"b":"x"})", R"({"a":1.5})", R"({"a":1e3})", R"({"a":1,"c":2})", R"({"a":1,"a":2})",
        R"({"a":"1"})", R"([1])", R"({"a":1,})", R"({"A":1})"}},
      {R"({"type":"object"})", {R"({})", R"({"x":[1,{"y":null}]})"}, {R"([])", R"("s")"}},
      {R"({"type":"object","additionalProperties":false})", {R"({})"}, {R"({"x":1})"}},
      {R"({"type":"object","additionalProperties":{"type":"boolean"}})",
       {R"({})", R"({"x":true,"y":false})"}, {R"({"x":1})", R"({"x":"true"})"}},
      {R"({"enum":["red","green",1,12,null,{"k":[1]}]})",
       {R"("red")", R"("green")", "1", "12", "null", R"({"k":[1]})", " 12 "},
       {R"("re")", R"("blue")", "2", "123", "true", R"({"k": [1]})", R"("red" 1)"}},
      {R"({"const":"only"})", {R"("only")"}, {R"("onl")", R"("only1")"}},
      {R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3})",
       {"[1]", "[1.5,-2e-3,0]", "[ 0 , 1 , 2 ]"}, {"[]", "[1,2,3,4]", R"(["1"])", "[1,]"}},
      {R"({"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false})",
       {"[]", R"(["a"])", R"(["a",2])"}, {R"([2])", R"(["a",2,3])", R"(["a","b"])"}},
      {R"({"type":"array","items":[{"type":"boolean"}],"additionalItems":{"type":"null"}})",
       {"[true]", "[false,null,null]"}, {"[null]", "[true,true]"}},
      {R"({"type":"string","minLength":2,"maxLength":3})",
       {R"("ab")", R"("abc")", "\"\xC3\xA9\xC3\xA9\"", R"("\n\t")", R"("\uD83D\uDE00x")", "\"\xF0\x9F\x98\x80x\""},
       {R"("a")", R"("abcd")", "\"\xC3\xA9\"", R"("\u00e9")", R"("\uD83D\uDE00")"}},
      {R"({"anyOf":[{"type":"string"},{"type":"null"}]})", {R"("x")", "null"}, {"1", "{}"}},
      {R"({"anyOf":[{"type":"integer"},{"type":"number"}]})", {"1", "1.5"}, {R"("1")"}},
      {R"({"type":["integer","null"]})", {"7", "null"}, {"7.0", "true"}},
      {R"({"type":"string","nullable":true})", {R"("x")", "null"}, {"1"}},
      {R"({"oneOf":[{"type":"object","properties":{"kind":{"const":"a"}},"required":["kind"]},{"type":"array"}]})",
       {R"({"kind":"a"})", "[1,2]"}, {R"({"kind":"b"})", R"({})"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"}, {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"definitions":{"c":{"enum":["x","y"]}},"type":"object","properties":{"c":{"allOf":[{"$ref":"#/definitions/c"}]}}})",
       {R"({"c":"y"})", "{}"}, {R"({"c":"z"})"}},
      {R"(true)", {"1", R"({"a":[]})", R"("s")"}, {"{", "tru"}},
      {R"({"description":"anything"})", {"1", "[]"}, {"x"}},
      {R"({"type":"integer"})", {"0", "-7", "123"}, {"01", "1.0", "-", "1e2", "12345678901234567890123456789012345678901"}},
      {R"({"type":"number"})", {"1e99", "-2.5E-12", "0.5"}, {"1e100", "1E-999", "1e+308"}},
      {R"({"type":"boolean"})", {"true", "false"}, {"null", "1"}},
      // Numeric bounds, decided digit by digit; bounded numbers have no exponent.
      {R"({"type":"integer","minimum":-3,"exclusiveMaximum":12})",
       {"-3", "0", "11", "5"}, {"-4", "12", "13", "100", "-30", "1e1"}},
      {R"({"type":"integer","exclusiveMinimum":2.5,"maximum":1000})", {"3", "999", "1000"}, {"2", "1001", "0", "-3"}},
      {R"({"type":"number","minimum":0.5,"maximum":2})", {"0.5", "1", "1.25", "2", "2.0", "0.75"},
       {"0.4", "0", "2.01", "3", "-1", "5e-1", "0.49999"}},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", {"0.5", "0.001"}, {"0", "1", "0.0", "1.0", "-0.5"}},
      {R"({"type":"number","minimum":5,"exclusiveMinimum":true})", {"6", "5.1"}, {"5", "4.9"}},
      {R"({"type":"integer","maximum":-10})", {"-10", "-11", "-1000"}, {"-9", "0", "5"}},
      // Property counts.
      {R"({"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,"maxProperties":2})",
       {R"({"a":1})", R"({"a":1,"b":2})"}, {"{}", R"({"a":1,"b":2,"c":3})"}},
      {R"({"type":"object","maxProperties":0})", {"{}"}, {R"({"a":1})"}},
      {R"({"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}},"minProperties":1})",
       {R"({"a":null})", R"({"b":null,"a":null})"}, {"{}"}},
      // Keywords next to enum / const keep only the values they accept.
      {R"({"type":"string","enum":["a",1,"bb"],"maxLength":1})", {R"("a")"}, {"1", R"("bb")"}},
      // unevaluatedProperties false on a free object: no keys.
      {R"({"type":"object","unevaluatedProperties":false})", {"{}"}, {R"({"a":1})"}},
      // oneOf whose alternatives are told apart by a required discriminator.
      {R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"]},
                    {"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]})",
       {R"({"k":"a","x":1})"}, {R"({"k":"b"})", R"({"x":1})"}},
      {R"({"properties":{"q\"uote":{"type":"null"},"é":{"type":"null"}}})",
       {R"({"q\"uote":null})", "{\"\xC3\xA9\":null}"}, {R"({"q\u0022uote":null})"}},
  };
  return k;
}

TEST(SchemaConstraint, ConformingAndNonConformingDocuments) {
  for (const Case& c : cases()) {
    const json schema = json::parse(c.schema);
    for (const std::string& doc : c.valid) EXPECT_TRUE(full_match(schema, doc)) << c.schema << "  doc: " << doc;
    for (const std::string& doc : c.invalid) EXPECT_FALSE(full_match(schema, doc)) << c.schema << "  doc: " << doc;
  }
}

TEST(SchemaConstraint, EveryPrefixOfAConformingDocumentIsAccepted) {
  for (const Case& c : cases()) {
    for (const std::string& doc : c.valid) {
      SchemaConstraint s(compile_json_schema(json::parse(c.schema)));
      for (size_t i = 0; i < doc.size(); ++i) {
        ASSERT_TRUE(s.accepts(doc.substr(i, 1))) << c.schema << "  doc: " << doc << " at byte " << i;
        s.advance(doc.substr(i, 1));
      }
      EXPECT_TRUE(s.complete()) << doc;
    }
  }
}

TEST(SchemaConstraint, CompileErrorsNameTheKeyword) {
  const std::vector<std::pair<const char*, const char*>> bad = {
      {"false", "admits no value"},
      {R"({"enum":[]})", "enum"},
      {R"({"type":"object","properties":{"a":{}},"required":["b"]})", "required"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "minItems"},
      {R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})", "minItems"},
      {R"({"type":"strin"})", "unknown type"},
      {R"({"$ref":"http://example.com/s.json"})", "$ref"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "allOf"},
      // What the recognizer does not enforce is refused, naming the keyword and where it is.
      {R"({"type":"object","properties":{"a":{"not":{"type":"null"}}}})", "#/properties/a: 'not'"},
      {R"({"type":"string","pattern":"^a"})", "'pattern'"},
      {R"({"if":{"type":"string"},"then":{"maxLength":1}})", "'if'"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"type":"object","propertyNames":{"maxLength":2}})", "'propertyNames'"},
      {R"({"type":"object","dependentRequired":{"a":["b"]}})", "dependencies"},
      {R"({"type":"array","contains":{"type":"null"}})", "'contains'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"number","multipleOf":0.5})", "'multipleOf'"},
      {R"({"type":"object","unevaluatedProperties":{"type":"null"}})", "'unevaluatedProperties'"},
      {R"({"$defs":{"a":{"type":"string"}},"items":{"$ref":"#/$defs/a","maxLength":2}})", "#/items: 'maxLength' next to '$ref'"},
      {R"({"anyOf":[{"type":"string"}],"type":"string"})", "'type' next to 'anyOf'"},
      {R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":2}]})", "'oneOf'"},
      {R"({"oneOf":[{"type":"integer"},{"type":"number","minimum":0}]})", "'oneOf'"},
      {R"({"oneOf":[{"type":"object","properties":{"a":{}}},{"type":"object","properties":{"b":{}}}]})", "'oneOf'"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "minimum"},
      {R"({"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1})", "minimum"},
      {R"({"type":"number","minimum":"1"})", "'minimum' must be a number"},
      {R"({"type":"object","properties":{"a":{}},"minProperties":2})", "minProperties"},
      {R"({"type":"object","properties":{"a":{},"b":{}},"required":["a","b"],"maxProperties":1})", "maxProperties"},
      {R"({"type":"string","enum":["abc"],"maxLength":2})", "enum"},
      {R"({"type":"string","minLength":-1})", "minLength"},
      {R"({"anyOf":[]})", "anyOf"},
      {R"([1])", "must be an object"},
  };
  for (const auto& [schema, what] : bad) {
    try {
      compile_json_schema(json::parse(schema));
      ADD_FAILURE() << "accepted " << schema;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << schema << ": " << e.what();
    }
  }
  json many = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 65; ++i) many["properties"][std::to_string(i)] = json::object();
  EXPECT_THROW(compile_json_schema(many), Error);
}

TEST(SchemaConstraint, RecursionIsBoundedByTheFrameLimit) {
  const json schema = json::parse(R"({"type":"array","items":{"$ref":"#"}})");
  SchemaConstraint c(compile_json_schema(schema));
  std::string open;
  for (int i = 0; i < SchemaConstraint::kMaxDepth; ++i) open += "[";
  EXPECT_TRUE(c.accepts(open));
  open.push_back('[');
  EXPECT_FALSE(c.accepts(open));
  // A self-referencing union has no value start and is refused byte by byte, not looped on.
  SchemaConstraint loop(compile_json_schema(json::parse(R"({"anyOf":[{"$ref":"#"}]})")));
  EXPECT_FALSE(loop.accepts("1"));
}

// An independent validator of the enforced subset (what a conforming document must satisfy).
size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

bool validate(const json& root, const json& s, const json& v, int depth = 0) {
  if (depth > 200) return false;
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    return validate(root, ref == "#" ? root : root.at(json::json_pointer(ref.substr(1))), v, depth + 1);
  }
  if (s.contains("allOf")) return validate(root, s["allOf"][0], v, depth + 1);
  for (const char* k : {"anyOf", "oneOf"}) {
    if (!s.contains(k)) continue;
    int hits = 0;
    for (const json& a : s[k]) hits += validate(root, a, v, depth + 1);
    return std::string(k) == "anyOf" ? hits > 0 : hits == 1;
  }
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) return std::find(s["enum"].begin(), s["enum"].end(), v) != s["enum"].end();
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_array()) types = s["type"].get<std::vector<std::string>>();
    else types.push_back(s["type"]);
    if (s.value("nullable", false)) types.push_back("null");
    const auto is = [&](const std::string& t) {
      if (t == "object") return v.is_object();
      if (t == "array") return v.is_array();
      if (t == "string") return v.is_string();
      if (t == "number") return v.is_number();
      if (t == "integer") return v.is_number_integer();
      if (t == "boolean") return v.is_boolean();
      return v.is_null();
    };
    if (std::none_of(types.begin(), types.end(), is)) return false;
  }
  if (v.is_number()) {
    const double x = v.get<double>();
    if (s.contains("minimum") && (x < s["minimum"].get<double>() || (s.value("exclusiveMinimum", json()) == true && x == s["minimum"].get<double>())))
      return false;
    if (s.contains("maximum") && (x > s["maximum"].get<double>() || (s.value("exclusiveMaximum", json()) == true && x == s["maximum"].get<double>())))
      return false;
    if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() && x >= s["exclusiveMaximum"].get<double>()) return false;
  }
  if (v.is_object()) {
    if (v.size() < s.value("minProperties", size_t{0}) || v.size() > s.value("maxProperties", SIZE_MAX)) return false;
    if (s.value("unevaluatedProperties", json(true)) == false && !s.contains("properties") && !v.empty()) return false;
    const json props = s.value("properties", json::object());
    for (const json& r : s.value("required", json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (props.contains(it.key())) {
        if (!validate(root, props[it.key()], it.value(), depth + 1)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validate(root, s["additionalProperties"], it.value(), depth + 1)) return false;
      }
    }
  }
  if (v.is_array()) {
    const json prefix = s.value("prefixItems", s.contains("items") && s["items"].is_array() ? s["items"] : json::array());
    for (size_t i = 0; i < v.size(); ++i) {
      json item = true;
      if (i < prefix.size()) item = prefix[i];
      else if (s.contains("items") && !s["items"].is_array()) item = s["items"];
      else if (s.contains("additionalItems")) item = s["additionalItems"];
      if (!validate(root, item, v[i], depth + 1)) return false;
    }
    if (v.size() < s.value("minItems", size_t{0}) || v.size() > s.value("maxItems", SIZE_MAX)) return false;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (n < s.value("minLength", size_t{0}) || n > s.value("maxLength", SIZE_MAX)) return false;
  }
  return true;
}

// Random byte-level walks through the recognizer: every completed text parses and validates.
TEST(SchemaConstraint, RandomWalksConformToTheSchema) {
  std::mt19937_64 rng(7);
  for (const Case& c : cases()) {
    const json schema = json::parse(c.schema);
    const auto compiled = compile_json_schema(schema);
    int done = 0;
    for (int run = 0; run < 30; ++run) {
      SchemaConstraint s(compiled);
      std::string text;
      for (int step = 0; step < 3000 && !(s.complete() && rng() % 4 == 0); ++step) {
        std::vector<uint8_t> ok;
        std::vector<double> w;
        for (int b = 0; b < 256; ++b) {
          const std::string piece(1, char(b));
          if (!s.accepts(piece)) continue;
          ok.push_back(uint8_t(b));
          w.push_back(b == '}' || b == ']' || b == '"' ? 30.0 : (b == ' ' || b == '\n') ? 0.3 : b >= 0x80 ? 0.05 : 1.0);
        }
        if (ok.empty() && s.complete()) break;  // trailing whitespace at its run limit
        ASSERT_FALSE(ok.empty()) << "dead end: " << c.schema << " after " << text;
        const uint8_t b = ok[std::discrete_distribution<size_t>(w.begin(), w.end())(rng)];
        s.advance(std::string(1, char(b)));
        text += char(b);
      }
      if (!s.complete()) continue;
      ++done;
      json v;
      try {
        v = json::parse(text);  // numbers included: the recognizer keeps them finite
      } catch (const json::exception& e) {
        FAIL() << c.schema << " produced " << text << ": " << e.what();
      }
      EXPECT_TRUE(validate(schema, schema, v)) << c.schema << " produced " << text;
    }
    EXPECT_GT(done, 10) << c.schema;
  }
}

TEST(SchemaConstraint, TokenMaskMatchesBruteForce) {
  const std::vector<std::string> vocab = {
      "{", "}", "[", "]", "\"", ":", ",", " ", "{\"", "\":", "\",", "\"}", "\"a", "\"a\"", "a", "b", "\"b\":",
      "colo", "r", "\"color\"", "red", "\"red\"", "gre", "en\"", "1", "12", "2", ".5", "-", "true", "null",
      "\xC3\xA9", "\xC3", "\\n", "\\u", "00e9", "<|end|>", "\"tags\":[", "x\"", "]}", "\n"};
  const int32_t end_id = 36;
  TokenMask mask(vocab, {end_id});
  const json schema = json::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"color":{"enum":["red","green"]},
          "tags":{"type":"array","items":{"type":"string","maxLength":2},"maxItems":2}},"required":["a"]})");
  const std::string doc = "{\"color\":\"red\", \"tags\":[\"x\\n\",\"\xC3\xA9\"],\"a\":12}";
  SchemaConstraint c(compile_json_schema(schema));
  for (size_t i = 0; i <= doc.size(); ++i) {
    std::vector<bool> allowed;
    mask.compute(c, allowed);
    for (size_t t = 0; t < vocab.size(); ++t) {
      const bool expect = int32_t(t) == end_id ? c.complete() : c.accepts(vocab[t]);
      EXPECT_EQ(allowed[t], expect) << "token [" << vocab[t] << "] after [" << doc.substr(0, i) << "]";
    }
    if (i < doc.size()) c.advance(doc.substr(i, 1));
  }
  EXPECT_TRUE(c.complete());
}

}  // namespace

namespace {

// $ref chains that double the paths at every level (a DAG of 2^25 paths over 50 nodes) and an
// enum of 16000 values stay cheap: first bytes are precomputed, literal ranges binary-searched.
std::string numbered(const char* prefix, int i) {  // (operator+ on a literal trips GCC 12's -Wrestrict)
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

TEST(SchemaConstraint, LargeSchemasStayCheap) {
  json dag = {{"$defs", json::object()}, {"$ref", "#/$defs/d0"}};
  const int levels = 25;
  for (int i = 0; i < levels; ++i) {
    const std::string next = numbered("#/$defs/d", i + 1);
    dag["$defs"][numbered("d", i)] = {{"anyOf", json::array({{{"$ref", next}}, {{"$ref", next}}})}};
  }
  dag["$defs"][numbered("d", levels)] = json::parse(R"({"type":"object","properties":{"x":{"type":"null"}}})");
  EXPECT_TRUE(full_match(dag, R"({"x":null})"));
  EXPECT_FALSE(full_match(dag, R"({"y":null})"));

  json many = {{"enum", json::array()}};
  std::vector<std::string> vocab;
  for (int i = 0; i < 16000; ++i) {
    many["enum"].push_back(numbered("v", i));
    if (i < 3000) vocab.push_back(numbered("v", i));
  }
  vocab.push_back("\"");
  vocab.push_back("\"v1");
  vocab.push_back("9\"");
  SchemaConstraint c(compile_json_schema(many));
  EXPECT_TRUE(c.accepts("\"v15999\""));
  EXPECT_FALSE(c.accepts("\"v16000\""));
  TokenMask mask(vocab);
  std::vector<bool> allowed;
  for (const char* piece : {"\"", "v1", "59", "9"}) {
    mask.compute(c, allowed);
    c.advance(piece);
  }
  mask.compute(c, allowed);
  EXPECT_TRUE(allowed[vocab.size() - 1]);   // after "v1599", "9\"" closes "v15999"
  EXPECT_TRUE(allowed[vocab.size() - 3]);   // a quote: "v1599" is a value too
  EXPECT_FALSE(allowed[vocab.size() - 2]);  // "\"v1" cannot follow
  c.advance("\"");
  EXPECT_TRUE(c.complete());
}

}  // namespace
