#include "text/jinja/template.h"

#include "core/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"

namespace brisk::jinja {

Template Template::parse(std::string source, Options options) {
  Template t;
  auto tokens = lex(source, {.trim_blocks = options.trim_blocks,
                             .lstrip_blocks = options.lstrip_blocks,
                             .name = options.name});
  t.body_ = std::make_shared<const Body>(parse_tokens(tokens, options.name));
  t.source_ = std::make_shared<const std::string>(std::move(source));
  t.options_ = std::move(options);
  return t;
}

std::string Template::render_values(const Value& globals) const {
  BRISK_CHECK(globals.is_dict(), options_.name, ": template globals must be a mapping");
  Interpreter in(globals, options_.name, options_.limits);
  std::string out;
  in.render(*body_, out);
  return out;
}

std::string Template::render(const nlohmann::ordered_json& globals) const {
  BRISK_CHECK(globals.is_object(), options_.name, ": template globals must be a JSON object");
  return render_values(from_json(globals));
}

std::string Template::render(const nlohmann::json& globals) const {
  BRISK_CHECK(globals.is_object(), options_.name, ": template globals must be a JSON object");
  return render_values(from_json(globals));
}

}  // namespace brisk::jinja
