// Syntax tree of a parsed template: expressions (Expr) and statements (Stmt). Nodes are
// immutable after parsing and carry the line/column where they start, for error messages.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/lexer.h"
#include "text/jinja/value.h"

namespace brisk::jinja {

class Interpreter;
using FilterFn = Value (*)(Interpreter&, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& input, CallArgs& args);

// Operators, resolved at parse time.
enum class Op : uint8_t {
  none, add, sub, mul, div, floordiv, mod, pow, concat, and_, or_,  // binary
  not_, neg, pos,                                                    // unary
  eq, ne, lt, le, gt, ge, in, not_in,                                // comparisons
};
const char* op_symbol(Op op);

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Expr {
  enum class Kind : uint8_t {
    literal,     // value
    name,        // name
    list,        // items
    tuple,       // items
    dict,        // items = key0, value0, key1, value1, ...
    attr,        // a.name
    item,        // a[b]
    slice,       // a[items[0]:items[1]:items[2]] (null entries = omitted)
    call,        // a(items..., kwargs...)
    filter,      // a|name(items..., kwargs...); a is null in a {% filter %} block chain head
    test,        // a is [not] name(items..., kwargs...)
    unary,       // op (not_, neg, pos) applied to a
    binary,      // a op b
    compare,     // a ops[0] items[0] ops[1] items[1] ...
    cond,        // b if a else c (c may be null)
    block_value, // the rendered body of a filter block / set block (internal)
  };
  Kind kind;
  SourcePos pos;
  std::string name;
  Value value;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<Op> ops;
  Op op = Op::none;
  bool negated = false;
  uint32_t depth = 1;  // height of this subtree (bounded by the parser)
  FilterFn filter_fn = nullptr;  // filter: the builtin, or null when unknown (fails if reached)
  TestFn test_fn = nullptr;      // test: likewise
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null: required
};

struct Stmt {
  enum class Kind : uint8_t {
    output,       // text
    print,        // expr
    if_,          // branches (cond, body); else_body
    for_,         // target in expr [if cond] [recursive]: body; else_body
    set,          // target = expr
    set_block,    // target = rendered body, through filters (a filter Expr chain or null)
    macro,        // text = name, params, body
    call_block,   // expr = the call, params = caller's params, body = caller's body
    filter_block, // expr = filter chain ending in block_value, body
    with,         // assignments, body
    break_,
    continue_,
    scope,        // body rendered in place (e.g. {% generation %})
  };
  Kind kind;
  SourcePos pos;
  std::string text;
  ExprPtr expr, target, cond;
  Body body, else_body;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<MacroParam> params;
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;
  bool recursive = false;
};

}  // namespace brisk::jinja
