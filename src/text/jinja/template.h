// Jinja2-compatible template engine for chat templates.
//
//   auto t = jinja::Template::parse(source, {.trim_blocks = true, .lstrip_blocks = true});
//   std::string text = t.render(globals_json);
//
// Rendering follows Python Jinja2 3.x byte for byte on the features chat templates use
// (statements, expressions, filters, tests, str/list/dict methods, undefined semantics,
// Python's str()/repr() of values). Differences from stock Jinja2, chosen to match how
// transformers renders chat templates: `tojson` is json.dumps(ensure_ascii=False) with
// indent/separators/sort_keys (no HTML escaping), the globals raise_exception() and
// strftime_now() exist, {% break %}/{% continue %} and {% generation %} are supported, and
// lists/dicts are immutable (as in ImmutableSandboxedEnvironment). No template loader:
// extends/include/import are errors. Parse and render errors are brisk::Error with
// "NAME:LINE:COLUMN: message".
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "text/jinja/ast.h"
#include "text/jinja/interpreter.h"

namespace brisk::jinja {

struct Options {
  bool trim_blocks = false;
  bool lstrip_blocks = false;
  std::string name = "template";  // shown in error messages
  RenderLimits limits = {};
};

class Template {
 public:
  static Template parse(std::string source, Options options = {});

  // `globals` must be a JSON object; its keys become template variables. Use ordered_json to
  // keep the key order of objects (it is visible through tojson, items() and loops).
  std::string render(const nlohmann::ordered_json& globals) const;
  std::string render(const nlohmann::json& globals) const;
  std::string render_values(const Value& globals) const;  // globals: a dict Value

  const std::string& source() const { return *source_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const Body> body_;
  Options options_;
};

}  // namespace brisk::jinja
