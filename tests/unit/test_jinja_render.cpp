// Jinja engine against outputs of Python Jinja2 3.1.6 (Debian python3-jinja2), rendered with
// transformers' environment (tests/jinja/render_oracle.py: trim_blocks, lstrip_blocks,
// ImmutableSandboxedEnvironment, json.dumps tojson) or, where `trim` is false, a plain
// environment. Each case: template, globals (JSON), expected text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "text/jinja/template.h"

namespace {

struct RenderCase {
  const char* name;
  const char* source;
  const char* globals;
  bool trim;
  const char* expected;
};

const RenderCase kCases[] = {
  {"TrimBlocksDropsNewlineAfterTag", "{% if true %}\nyes\n{% endif %}\nend", "{}", true, "yes\nend"},
  {"LstripBlocksRemovesIndent", "  {% if true %}\n  x\n  {% endif %}\ny", "{}", true, "  x\ny"},
  {"NoTrimWithoutOptions", "  {% if true %}\n  x\n  {% endif %}\ny", "{}", false, "  \n  x\n  \ny"},
  {"MinusStripsAllWhitespace", "a  \n {%- if true -%} \n b \n {%- endif -%}\n  c", "{}", true, "abc"},
  {"PlusDisablesLstrip", "  {%+ if true %}x{% endif %}", "{}", true, "  x"},
  {"VariableTagsAreNotLstripped", "  {{ 'v' }}\n  {{- 'w' }}", "{}", true, "  vw"},
  {"CommentsTrimmed", "a\n  {# note #}\nb {#- x -#}  c", "{}", true, "a\nbc"},
  {"RawBlock", "{% raw %}{{ x }}{% if %}{% endraw %}", "{}", true, "{{ x }}{% if %}"},
  {"TrailingNewlineDropped", "x\n", "{}", true, "x"},
  {"CrLfNormalised", "a\r\nb\rc", "{}", true, "a\nb\nc"},
  {"Arithmetic", "{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1 + 2.5 }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ true + 1 }}", "{}", true, "3.5 3 -4 2 1024 3.5 abab [1, 2] 2"},
  {"FloatsPrintLikePython", "{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.00001 }} {{ 3.0 }} {{ -0.0 }} {{ 1/3 }}", "{}", true, "0.30000000000000004 1e+16 1000000000000000.0 1e-05 3.0 -0.0 0.3333333333333333"},
  {"ReprOfContainers", "{{ [1, 'a', none, true, 2.5, (1,), {'k': \"it's\"}] }}", "{}", true, "[1, 'a', None, True, 2.5, (1,), {'k': \"it's\"}]"},
  {"Comparisons", "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} }}", "{}", true, "True True True True True True"},
  {"BooleanOperatorsReturnOperands", "{{ 0 or 'b' }} {{ 1 and 2 }} {{ none or [] }} {{ not 0 }}", "{}", true, "b 2 [] True"},
  {"Ternary", "[{{ 'y' if x else 'n' }}][{{ 'y' if false }}]", "{\"x\": 1}", true, "[y][]"},
  {"Slicing", "{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3, 4][::2] }} {{ 'héllo'[1:3] }} {{ [1, 2, 3][-1] }}", "{}", true, "el olleh [1, 3] él 3"},
  {"LoopVariables", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem is defined }}{{ loop.nextitem|default('-') }};{% endfor %}", "{}", true, "103TrueFalse3Falseb;212FalseFalse3Truec;321FalseTrue3True-;"},
  {"LoopFilterAndElse", "{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}:{{ x }} {% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}", "{}", true, "1:2 2:4 |empty"},
  {"LoopBreakContinue", "{% for i in range(10) %}{% if i is odd %}{% continue %}{% endif %}{% if i > 6 %}{% break %}{% endif %}{{ i }}{% endfor %}", "{}", true, "0246"},
  {"LoopUnpacking", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"z\": 1, \"a\": 2}}", true, "z=1;a=2;za"},
  {"LoopScopeDoesNotLeak", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}", "{}", true, "23|1"},
  {"NamespaceCarriesState", "{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", true, "6"},
  {"IfDoesNotScope", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", "{}", true, "5"},
  {"RecursiveLoop", "{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }}){% endif %}{% endfor %}", "{\"tree\": [{\"name\": \"a\", \"kids\": [{\"name\": \"b\", \"kids\": []}, {\"name\": \"c\"}]}, {\"name\": \"d\"}]}", true, "a(bc)d"},
  {"Macros", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', greeting='Hi') }} {{ greet() }}", "{}", true, "Hello, Ann! Hi, Bob! Hello, !"},
  {"MacroVarargsKwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}", "{}", true, "1(2, 3){'k': 'v'}"},
  {"CallBlock", "{% macro wrap(items) %}{% for i in items %}[{{ caller(i) }}]{% endfor %}{% endmacro %}{% call(v) wrap([1, 2]) %}<{{ v }}>{% endcall %}", "{}", true, "[<1>][<2>]"},
  {"MacroRecursion", "{% macro r(n) %}{% if n %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(4) }}", "{}", true, "4321"},
  {"FilterBlockAndSetBlock", "{% filter upper %}a{{ 'b' }}{% endfilter %}|{% set s | trim %}  x  {% endset %}[{{ s }}]", "{}", true, "AB|[x]"},
  {"UndefinedBehaviour", "[{{ missing }}][{{ missing is defined }}][{{ missing|default('d') }}][{{ missing|length }}][{% for x in missing %}x{% endfor %}][{{ missing ~ 'c' }}][{{ d.nokey }}][{{ d.nokey is defined }}]", "{\"d\": {}}", true, "[][False][d][0][][c][][False]"},
  {"StringFilters", "{{ '  a  '|trim }}|{{ 'hello world-x'|title }}|{{ 'hELLO'|capitalize }}|{{ 'abc'|upper }}|{{ 'a-b'|replace('-', '+') }}|{{ [1, 2]|join(', ') }}|{{ 'x'|center(5) }}|{{ 'a\nb'|indent(2) }}", "{}", true, "a|Hello World-X|Hello|ABC|a+b|1, 2|  x  |a\n  b"},
  {"ListFilters", "{{ [3, 1, 2]|sort }}|{{ ['b', 'A']|sort }}|{{ [1, 2, 1]|unique|list }}|{{ [1, 2]|reverse|list }}|{{ [1, 2]|first }}{{ [1, 2]|last }}|{{ [1, 5]|max }}|{{ [1, 2]|sum }}|{{ {'b': 1, 'a': 2}|dictsort }}|{{ {'a': 1}|items|list }}", "{}", true, "[1, 2, 3]|['A', 'b']|[1, 2]|[2, 1]|12|5|3|[('a', 2), ('b', 1)]|[('a', 1)]"},
  {"SelectAndMap", "{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join(',') }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ ms|map(attribute='role')|unique|list }}|{{ [1, 2, 3]|select('odd')|list }}|{{ ['1', '2']|map('int')|sum }}", "{\"ms\": [{\"role\": \"user\", \"c\": \"a\"}, {\"role\": \"bot\", \"c\": \"b\"}, {\"role\": \"user\", \"c\": \"c\"}]}", true, "a,c|1|['user', 'bot']|[1, 3]|3"},
  {"ConversionFilters", "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '3.5'|float }} {{ 42|string }} {{ none|string }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ -3|abs }} {{ 'abc'|list }}", "{}", true, "42 4 0 7 3 3.5 42 None 2.0 3.14 3 ['a', 'b', 'c']"},
  {"ToJson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}|{{ [1, 2]|tojson(separators=(',', ':')) }}|{{ 'ü'|tojson(ensure_ascii=true) }}", "{\"d\": {\"a\": [1, 2.5, null, true], \"é\": \"<&>\\n\", \"e\": {}}}", true, "{\"a\": [1, 2.5, null, true], \"é\": \"<&>\\n\", \"e\": {}}|{\n  \"a\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"é\": \"<&>\\n\",\n  \"e\": {}\n}|{\"a\": 2, \"b\": 1}|[1,2]|\"\\u00fc\""},
  {"Tests", "{{ 'x' is string }}{{ {} is mapping }}{{ [] is iterable }}{{ 1 is number }}{{ true is number }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ none is none }}{{ 0 is false }}{{ false is false }}{{ 6 is divisibleby 3 }}{{ 3 is in [1, 3] }}{{ 'ab' is lower }}{{ {} is sequence }}{{ 1 is iterable }}", "{}", true, "TrueTrueTrueTrueTrueTrueFalseTrueTrueFalseTrueTrueTrueTrueTrueFalse"},
  {"StringMethods", "{{ ' a '.strip() }}|{{ 'xa'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith(('x', 'lo')) }}|{{ 'héllo'.find('l') }}|{{ 'banana'.count('an') }}|{{ '{} {x}'.format(1, x=2) }}|{{ 'hello world'.title() }}", "{}", true, "a|a|['a', 'b', '', 'c']|['a', 'b']|['a,b', 'c']|True|True|2|2|1 2|Hello World"},
  {"DictMethods", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 0) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", "{\"d\": {\"a\": 1, \"b\": 2}}", true, "1 None 0 ['a', 'b'] [1, 2] [('a', 1), ('b', 2)]"},
  {"UnicodeCaseAndLength", "{{ 'ß'.upper() }} {{ 'Émile'|lower }} {{ '日本語'|length }} {{ '日本語'[1] }} {{ ['日本', '​'] }}", "{}", true, "SS émile 3 本 ['日本', '\\u200b']"},
  {"MarkupConcatenationEscapes", "{{ 'a'|safe + '<b>' }}|{{ '<c>' + 'd'|safe }}|{{ '<x>'|e }}", "{}", true, "a&lt;b&gt;|&lt;c&gt;d|&lt;x&gt;"},
  {"PercentAndFormatFilter", "{{ '%s=%d'|format('x', 42) }} {{ '%05.2f|%-4s|%r' % (3.14159, 'ab', 'q') }}", "{}", true, "x=42 03.14|ab  |'q'"},
  {"GeneratorTruthyAndOneShot", "{% set g = [0]|select('odd') %}{{ 'T' if g else 'F' }}{% set h = [1, 2]|map('string') %}{{ h|join }}{{ h|join }}", "{}", true, "T12"},
};

std::string render(const std::string& source, const std::string& globals, bool trim = true) {
  auto t = brisk::jinja::Template::parse(source, {.trim_blocks = trim, .lstrip_blocks = trim});
  return t.render(nlohmann::ordered_json::parse(globals));
}

class JinjaRender : public ::testing::TestWithParam<RenderCase> {};

TEST_P(JinjaRender, MatchesJinja2) {
  const RenderCase& c = GetParam();
  EXPECT_EQ(render(c.source, c.globals, c.trim), c.expected) << c.source;
}

INSTANTIATE_TEST_SUITE_P(Jinja2Outputs, JinjaRender, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<RenderCase>& info) {
                           return std::string(info.param.name);
                         });

// The message of the brisk::Error thrown while parsing or rendering, or "" when none.
std::string error_of(const std::string& source, const std::string& globals = "{}") {
  try {
    render(source, globals);
  } catch (const brisk::Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaErrors, ParseErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("line one\n  {{ 1 + }}"), "template:2:10: syntax error: unexpected end of print statement");
  EXPECT_EQ(error_of("{% if true %}never closed"),
            "template:1:26: syntax error: unexpected end of template, expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(error_of("a\n\n   {% frobnicate %}"), "template:3:7: syntax error: encountered unknown tag 'frobnicate'");
  EXPECT_EQ(error_of("{{ 'unterminated }}"), "template:1:4: syntax error: unterminated string literal");
  EXPECT_EQ(error_of("{% for %}{% endfor %}"), "template:1:8: syntax error: can't assign to end of statement block");
  EXPECT_EQ(error_of("{{ (1 }}"), "template:1:7: syntax error: unexpected '}', expected ')'");
  EXPECT_EQ(error_of("{% endfor %}"), "template:1:4: syntax error: encountered unknown tag 'endfor'");
  EXPECT_NE(error_of("{% include 'x.jinja' %}").find("not supported"), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("ok\n{{ x.y }}"), "template:2:5: 'x' is undefined");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "template:1:8: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{{ 1 / 0 }}"), "template:1:6: division by zero");
  EXPECT_EQ(error_of("\n  {{ raise_exception('Roles must alternate') }}"), "template:2:21: Roles must alternate");
  EXPECT_EQ(error_of("{{ [1, 2]|selectattr('x')|length }}"), "template:1:27: object of type 'generator' has no len()");
  EXPECT_EQ(error_of("{{ m.append(1) }}", R"({"m": []})"), "template:1:12: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_of("{{ 'a' < 1 }}"), "template:1:4: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_of("{{ d.k.j }}", R"({"d": {}})"), "template:1:7: 'dict object' has no attribute 'k'");
  EXPECT_EQ(error_of("{{ x|nosuchfilter }}"), "template:1:6: no filter named 'nosuchfilter'");
  EXPECT_EQ(error_of("{% set a, b = [1] %}"), "template:1:4: not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(error_of("{{ none|tojson }}{{ x|tojson }}"), "template:1:23: tojson: Object of type Undefined is not JSON serializable");
}

TEST(JinjaErrors, UnknownFilterInUntakenBranchIsFine) {
  EXPECT_EQ(render("{% if false %}{{ x|from_json }}{% endif %}ok", "{}"), "ok");
}

TEST(JinjaLimits, HostileTemplatesFailInsteadOfHanging) {
  EXPECT_NE(error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}").find("recursion depth"), std::string::npos);
  EXPECT_NE(error_of("{{ 'a' * 100000000000 }}").find("exceeds the limit"), std::string::npos);
  EXPECT_NE(error_of("{{ range(10000000000)|length }}").find("range() too large"), std::string::npos);
  EXPECT_NE(error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}").find("nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  // Left-deep chains are built by loops: their depth is bounded separately.
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_NE(error_of(chain + " }}").find("expression nested too deeply"), std::string::npos);
  std::string attrs = "{{ x";
  for (int i = 0; i < 100000; ++i) attrs += ".a";
  EXPECT_NE(error_of(attrs + " }}").find("expression nested too deeply"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[]) %}{% for i in range(600) %}{% set ns.l = [ns.l] %}{% endfor %}")
                .find("value nested too deeply"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}").find("contains itself"),
            std::string::npos);
}

TEST(JinjaLimits, StringSizeLimitStopsDoubling) {
  auto t = brisk::jinja::Template::parse(
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
      {.limits = {.max_output_bytes = 1 << 20}});
  try {
    t.render(nlohmann::ordered_json::object());
    FAIL() << "expected the size limit to stop the render";
  } catch (const brisk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the limit of 1048576"), std::string::npos) << e.what();
  }
}

TEST(JinjaLimits, WorkLimitStopsNestedLoops) {
  auto t = brisk::jinja::Template::parse(
      "{% for i in range(1000) %}{% for j in range(1000) %}{{ '' }}{% endfor %}{% endfor %}",
      {.limits = {.max_steps = 100000}});
  try {
    t.render(nlohmann::ordered_json::object());
    FAIL() << "expected the work limit to stop the render";
  } catch (const brisk::Error& e) {
    EXPECT_NE(std::string(e.what()).find("work limit"), std::string::npos) << e.what();
  }
}

TEST(JinjaTemplate, ObjectKeyOrderIsKeptWithOrderedJson) {
  EXPECT_EQ(render("{{ d|tojson }}{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"z": 1, "a": 2, "m": 3}})"),
            R"({"z": 1, "a": 2, "m": 3}zam)");
}

TEST(JinjaTemplate, TemplateNameAppearsInErrors) {
  auto t = brisk::jinja::Template::parse("{{ x.y }}", {.name = "chat.jinja"});
  try {
    t.render(nlohmann::ordered_json::object());
    FAIL();
  } catch (const brisk::Error& e) {
    EXPECT_EQ(std::string(e.what()), "chat.jinja:1:5: 'x' is undefined");
  }
}

TEST(JinjaTemplate, GlobalsMustBeAnObject) {
  auto t = brisk::jinja::Template::parse("x");
  EXPECT_THROW(t.render(nlohmann::ordered_json::array()), brisk::Error);
}

}  // namespace

TEST(JinjaRender, MacroClosuresAreFreedAfterRender) {
  // A macro is stored in the frame it closes over (so that it can recurse): a reference cycle
  // that the interpreter breaks when the render ends. The frame also holds `kept`, a list shared
  // with the globals; afterwards nothing but the globals may own that list.
  using namespace brisk::jinja;
  auto t = Template::parse(
      "{% set kept = items %}{% macro m(n) %}{{ n }}{% if n > 0 %}{{ m(n - 1) }}{% endif %}{% endmacro %}"
      "{% call m(1) %}{% endcall %}{{ m(2) }}{{ kept|length }}");
  const brisk::jinja::Value globals = from_json(nlohmann::ordered_json::parse(R"({"items": [1, 2]})"));
  const ListPtr& items = globals.as_dict()->find(std::string_view("items"))->as_list();
  const long before = items.use_count();
  EXPECT_EQ(t.render_values(globals), "102102");
  EXPECT_EQ(items.use_count(), before);
}

TEST(JinjaRender, SelfReferencingNamespacesAreFreedAfterRender) {
  // namespace() is mutable, so it can come to hold itself; the interpreter empties the
  // namespaces it made when the render ends. `kept` (a list shared with the globals) is
  // stored in such a namespace: afterwards nothing but the globals may own it.
  using namespace brisk::jinja;
  auto t = Template::parse(
      "{% set ns = namespace(kept=items) %}{% set ns.self = ns %}{% set ns.l = [ns] %}"
      "{{ ns.self.self.kept|length }}");
  const brisk::jinja::Value globals = from_json(nlohmann::ordered_json::parse(R"({"items": [1, 2]})"));
  const ListPtr& items = globals.as_dict()->find(std::string_view("items"))->as_list();
  const long before = items.use_count();
  EXPECT_EQ(t.render_values(globals), "2");
  EXPECT_EQ(items.use_count(), before);
}
