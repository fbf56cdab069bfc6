// Jinja parser: tokens to a statement list, with Jinja2's grammar and operator precedence
// (condexpr < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary < filters
// and tests < postfix access/calls). Errors name the template, line and column.
#pragma once
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace brisk::jinja {

Body parse_tokens(const std::vector<Token>& tokens, const std::string& template_name);

}  // namespace brisk::jinja
