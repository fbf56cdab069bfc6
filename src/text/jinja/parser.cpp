#include "text/jinja/parser.h"

#include <charconv>
#include <cstdlib>

#include "core/error.h"
#include "text/jinja/builtins.h"

namespace brisk::jinja {

namespace {

constexpr int kMaxParseNesting = 200;         // statement / bracket nesting, bounds the C++ stack
constexpr uint32_t kMaxExprDepth = 400;  // depth of one expression tree

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, const std::string& name) : toks_(tokens), name_(name) {}

  Body parse_all() {
    Body body = subparse({});
    if (cur().kind != TokenKind::eof) error(cur(), "unexpected tag");
    return body;
  }

 private:
  const std::vector<Token>& toks_;
  const std::string& name_;
  size_t i_ = 0;
  int depth_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxParseNesting) p.error(p.cur(), "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[i_];
    if (i_ + 1 < toks_.size()) ++i_;
    return t;
  }

  [[noreturn]] void error(const Token& t, const std::string& msg) const {
    fail(name_, ":", t.pos.line, ":", t.pos.column, ": syntax error: ", msg);
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::eof: return "end of template";
      case TokenKind::block_end: return "end of statement block";
      case TokenKind::variable_end: return "end of print statement";
      case TokenKind::block_begin: return "begin of statement block";
      case TokenKind::variable_begin: return "begin of print statement";
      case TokenKind::data: return "template data";
      default: return "'" + t.text + "'";
    }
  }

  bool is_op(const char* op) const { return cur().kind == TokenKind::op && cur().text == op; }
  bool is_name(const char* n) const { return cur().kind == TokenKind::name && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!is_op(op)) error(cur(), str_cat("expected '", op, "', got ", describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::name) error(cur(), str_cat("expected a name, got ", describe(cur())));
    return next().text;
  }
  void expect_block_end() {
    if (cur().kind != TokenKind::block_end)
      error(cur(), str_cat("expected end of statement block, got ", describe(cur())));
    next();
  }

  ExprPtr make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->pos = at.pos;
    return e;
  }

  // Records the depth of a finished node. Left-deep chains (1 + 1 + ..., x.a.a...) are built
  // by loops, not recursion, so this is what bounds the evaluator's (and destructor's) stack.
  ExprPtr seal(ExprPtr e) {
    uint32_t d = 0;
    auto see = [&d](const ExprPtr& c) {
      if (c) d = std::max(d, c->depth);
    };
    see(e->a);
    see(e->b);
    see(e->c);
    for (const auto& x : e->items) see(x);
    for (const auto& kv : e->kwargs) see(kv.second);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth)
      fail(name_, ":", e->pos.line, ":", e->pos.column, ": syntax error: expression nested too deeply");
    return e;
  }

  // ---- statements -------------------------------------------------------------------------

  // Parses until a block tag whose first name is in `end_names` (left unconsumed: cur() is
  // that name) or the end of the template.
  Body subparse(const std::vector<std::string>& end_names) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.kind == TokenKind::eof) {
        if (!end_names.empty()) {
          std::string expected;
          for (const auto& n : end_names) expected += (expected.empty() ? "'" : " or '") + n + "'";
          error(t, str_cat("unexpected end of template, expected ", expected));
        }
        return body;
      }
      if (t.kind == TokenKind::data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::output;
        s->pos = t.pos;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.kind == TokenKind::variable_begin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::print;
        s->pos = t.pos;
        s->expr = parse_tuple(true, false);
        if (cur().kind != TokenKind::variable_end)
          error(cur(), str_cat("expected end of print statement, got ", describe(cur())));
        next();
        body.push_back(std::move(s));
      } else if (t.kind == TokenKind::block_begin) {
        const Token& kw = peek();
        if (kw.kind != TokenKind::name) error(kw, "tag name expected");
        for (const auto& n : end_names) {
          if (kw.text == n) {
            next();
            return body;
          }
        }
        next();
        body.push_back(parse_statement(end_names));
      } else {
        error(t, str_cat("unexpected ", describe(t)));
      }
    }
  }

  StmtPtr new_stmt(Stmt::Kind kind, const Token& at) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->pos = at.pos;
    return s;
  }

  StmtPtr parse_statement(const std::vector<std::string>& enclosing_end) {
    const Token& kw = cur();
    const std::string& k = kw.text;
    if (k == "if") return parse_if();
    if (k == "for") return parse_for();
    if (k == "set") return parse_set();
    if (k == "macro") return parse_macro();
    if (k == "call") return parse_call_block();
    if (k == "filter") return parse_filter_block();
    if (k == "with") return parse_with();
    if (k == "generation") {
      next();
      expect_block_end();
      auto s = new_stmt(Stmt::Kind::scope, kw);
      s->body = subparse({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (k == "break" || k == "continue") {
      next();
      auto s = new_stmt(k == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, kw);
      expect_block_end();
      return s;
    }
    if (k == "extends" || k == "include" || k == "import" || k == "from" || k == "block")
      error(kw, str_cat("'", k, "' is not supported in chat templates (no template loader)"));
    std::string msg = str_cat("encountered unknown tag '", k, "'");
    if (!enclosing_end.empty()) {
      msg += ", expected ";
      for (size_t i = 0; i < enclosing_end.size(); ++i)
        msg += (i ? " or '" : "'") + enclosing_end[i] + "'";
    }
    error(kw, msg);
  }

  StmtPtr parse_if() {
    auto s = new_stmt(Stmt::Kind::if_, cur());
    next();  // if
    while (true) {
      ExprPtr cond = parse_tuple(false, false);
      expect_block_end();
      Body body = subparse({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      std::string tag = next().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"});
        next();
      }
      break;
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_for() {
    auto s = new_stmt(Stmt::Kind::for_, cur());
    next();  // for
    s->target = parse_assign_target(true);
    if (!skip_name("in")) error(cur(), str_cat("expected 'in', got ", describe(cur())));
    s->expr = parse_tuple(false, true);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (skip_name("recursive")) s->recursive = true;
    expect_block_end();
    s->body = subparse({"endfor", "else"});
    if (next().text == "else") {
      expect_block_end();
      s->else_body = subparse({"endfor"});
      next();
    }
    expect_block_end();
    return s;
  }

  StmtPtr parse_set() {
    auto s = new_stmt(Stmt::Kind::set, cur());
    next();  // set
    s->target = parse_assign_target(false);
    if (skip_op("=")) {
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    s->kind = Stmt::Kind::set_block;
    if (is_op("|")) s->expr = parse_filter_chain();
    expect_block_end();
    s->body = subparse({"endset"});
    next();
    expect_block_end();
    return s;
  }

  // name | name.attr (set only) | tuple of names
  ExprPtr parse_assign_target(bool for_loop) {
    const Token& start = cur();
    ExprPtr target;
    if (!for_loop && cur().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == ".") {
      auto e = make(Expr::Kind::attr, cur());
      auto ns = make(Expr::Kind::name, cur());
      ns->name = next().text;
      next();  // .
      e->name = expect_name();
      e->a = std::move(ns);
      return e;
    }
    bool paren = skip_op("(");
    auto tuple = make(Expr::Kind::tuple, start);
    while (true) {
      const Token& t = cur();
      if (t.kind != TokenKind::name) error(t, str_cat("can't assign to ", describe(t)));
      auto n = make(Expr::Kind::name, t);
      n->name = next().text;
      if (n->name == "true" || n->name == "false" || n->name == "none" || n->name == "True" ||
          n->name == "False" || n->name == "None")
        error(t, str_cat("can't assign to '", n->name, "'"));
      tuple->items.push_back(std::move(n));
      if (!skip_op(",")) break;
      if (paren && is_op(")")) break;
      if (!paren && cur().kind != TokenKind::name) break;
    }
    if (paren) expect_op(")");
    if (tuple->items.size() == 1 && !paren) return std::move(tuple->items[0]);
    if (tuple->items.size() == 1 && paren) return std::move(tuple->items[0]);
    return tuple;
  }

  StmtPtr parse_macro() {
    auto s = new_stmt(Stmt::Kind::macro, cur());
    next();  // macro
    s->text = expect_name();
    parse_signature(s->params);
    expect_block_end();
    s->body = subparse({"endmacro"});
    next();
    if (cur().kind == TokenKind::name) next();  // {% endmacro name %}
    expect_block_end();
    return s;
  }

  void parse_signature(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      else if (!params.empty() && params.back().default_value)
        error(cur(), "non-default argument follows default argument");
      params.push_back(std::move(p));
    }
    next();
  }

  StmtPtr parse_call_block() {
    auto s = new_stmt(Stmt::Kind::call_block, cur());
    next();  // call
    if (is_op("(")) parse_signature(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::call) error(cur(), "expected call");
    expect_block_end();
    s->body = subparse({"endcall"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = new_stmt(Stmt::Kind::filter_block, cur());
    next();  // filter
    s->expr = parse_filter_chain_no_pipe();
    expect_block_end();
    s->body = subparse({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = new_stmt(Stmt::Kind::with, cur());
    next();  // with
    while (cur().kind != TokenKind::block_end) {
      if (!s->assignments.empty()) expect_op(",");
      ExprPtr target = parse_assign_target(true);
      expect_op("=");
      s->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    s->body = subparse({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  // "|f1(args)|f2" applied to the block value.
  ExprPtr parse_filter_chain() {
    auto node = make(Expr::Kind::block_value, cur());
    while (skip_op("|")) node = parse_filter(std::move(node));
    return node;
  }
  ExprPtr parse_filter_chain_no_pipe() {
    auto node = make(Expr::Kind::block_value, cur());
    node = parse_filter(std::move(node));
    while (skip_op("|")) node = parse_filter(std::move(node));
    return node;
  }

  // ---- expressions ------------------------------------------------------------------------

  // Jinja's parse_tuple: an expression, or a tuple when commas follow.
  ExprPtr parse_tuple(bool with_condexpr, bool for_iter) {
    const Token& start = cur();
    auto parse_one = [&]() { return with_condexpr ? parse_expression(true) : parse_or(); };
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        is_tuple = true;
      }
      if (tuple_ends(for_iter)) break;
      items.push_back(parse_one());
    }
    if (!is_tuple) {
      if (items.empty()) error(cur(), str_cat("expected an expression, got ", describe(cur())));
      return std::move(items[0]);
    }
    auto t = make(Expr::Kind::tuple, start);
    t->items = std::move(items);
    return seal(std::move(t));
  }

  bool tuple_ends(bool for_iter) const {
    const Token& t = cur();
    if (t.kind == TokenKind::variable_end || t.kind == TokenKind::block_end || t.kind == TokenKind::eof) return true;
    if (t.kind == TokenKind::op && t.text == ")") return true;
    if (for_iter && t.kind == TokenKind::name && (t.text == "recursive" || t.text == "if")) return true;
    return false;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const Token& at = next();
      auto e = make(Expr::Kind::cond, at);
      e->a = parse_or();
      e->b = std::move(expr);
      if (skip_name("else")) e->c = parse_expression(true);
      expr = seal(std::move(e));
    }
    return expr;
  }

  static Op binary_op_of(const std::string& t) {
    if (t == "+") return Op::add;
    if (t == "-") return Op::sub;
    if (t == "*") return Op::mul;
    if (t == "/") return Op::div;
    if (t == "//") return Op::floordiv;
    if (t == "%") return Op::mod;
    if (t == "**") return Op::pow;
    if (t == "~") return Op::concat;
    if (t == "and") return Op::and_;
    return Op::or_;
  }

  ExprPtr binary(const std::string& op, const Token& at, ExprPtr l, ExprPtr r) {
    auto e = make(Expr::Kind::binary, at);
    e->op = binary_op_of(op);
    e->name = op;
    e->a = std::move(l);
    e->b = std::move(r);
    return seal(std::move(e));
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      const Token& at = next();
      l = binary("or", at, std::move(l), parse_and());
    }
    return l;
  }

  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      const Token& at = next();
      l = binary("and", at, std::move(l), parse_not());
    }
    return l;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      const Token& at = next();
      auto e = make(Expr::Kind::unary, at);
      e->op = Op::not_;
      e->a = parse_not();
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const Token& start = cur();
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      Op op;
      if (is_op("==")) op = Op::eq;
      else if (is_op("!=")) op = Op::ne;
      else if (is_op("<")) op = Op::lt;
      else if (is_op("<=")) op = Op::le;
      else if (is_op(">")) op = Op::gt;
      else if (is_op(">=")) op = Op::ge;
      else if (is_name("in")) op = Op::in;
      else if (is_name("not") && peek().kind == TokenKind::name && peek().text == "in") {
        next();
        op = Op::not_in;
      } else {
        break;
      }
      next();
      if (!cmp) {
        cmp = make(Expr::Kind::compare, start);
        cmp->a = std::move(first);
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? seal(std::move(cmp)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& at = next();
      l = binary(at.text, at, std::move(l), parse_concat());
    }
    return l;
  }

  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      const Token& at = next();
      l = binary("~", at, std::move(l), parse_math2());
    }
    return l;
  }

  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& at = next();
      l = binary(at.text, at, std::move(l), parse_pow());
    }
    return l;
  }

  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      const Token& at = next();
      l = binary("**", at, std::move(l), parse_unary(true));
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      const Token& at = next();
      node = make(Expr::Kind::unary, at);
      node->op = at.text == "-" ? Op::neg : Op::pos;
      node->a = parse_unary(false);
      node = seal(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.kind) {
      case TokenKind::name: {
        next();
        if (t.text == "true" || t.text == "True") return literal(t, Value(true));
        if (t.text == "false" || t.text == "False") return literal(t, Value(false));
        if (t.text == "none" || t.text == "None") return literal(t, Value::none());
        auto e = make(Expr::Kind::name, t);
        e->name = t.text;
        return e;
      }
      case TokenKind::string: {
        std::string s = next().text;
        while (cur().kind == TokenKind::string) s += next().text;
        return literal(t, Value(std::move(s)));
      }
      case TokenKind::integer: {
        next();
        int64_t v = 0;
        auto res = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (res.ec != std::errc() || res.ptr != t.text.data() + t.text.size())
          error(t, str_cat("integer literal out of range: ", t.text));
        return literal(t, Value(v));
      }
      case TokenKind::floating: {
        next();
        return literal(t, Value(std::strtod(t.text.c_str(), nullptr)));
      }
      case TokenKind::op:
        if (t.text == "(") {
          next();
          if (skip_op(")")) {
            auto e = make(Expr::Kind::tuple, t);
            return e;
          }
          ExprPtr inner = parse_tuple(true, false);
          if (inner->kind == Expr::Kind::tuple && is_op(")")) {
            next();
            return inner;
          }
          expect_op(")");
          return inner;
        }
        if (t.text == "[") {
          next();
          auto e = make(Expr::Kind::list, t);
          while (!is_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("]")) break;
            e->items.push_back(parse_expression(true));
          }
          next();
          return seal(std::move(e));
        }
        if (t.text == "{") {
          next();
          auto e = make(Expr::Kind::dict, t);
          while (!is_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("}")) break;
            e->items.push_back(parse_expression(true));
            expect_op(":");
            e->items.push_back(parse_expression(true));
          }
          next();
          return seal(std::move(e));
        }
        break;
      default: break;
    }
    error(t, str_cat("unexpected ", describe(t)));
  }

  ExprPtr literal(const Token& t, Value v) {
    auto e = make(Expr::Kind::literal, t);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".")) {
        const Token& at = next();
        if (cur().kind == TokenKind::name) {
          auto e = make(Expr::Kind::attr, at);
          e->name = next().text;
          e->a = std::move(node);
          node = seal(std::move(e));
        } else if (cur().kind == TokenKind::integer) {
          auto e = make(Expr::Kind::item, at);
          e->a = std::move(node);
          e->b = literal(cur(), Value(int64_t(std::strtoll(cur().text.c_str(), nullptr, 10))));
          next();
          node = seal(std::move(e));
        } else {
          error(cur(), str_cat("expected name or number, got ", describe(cur())));
        }
      } else if (is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& at = next();  // [
    std::vector<ExprPtr> parts(3);
    int colons = 0;
    while (!is_op("]")) {
      if (is_op(":")) {
        next();
        if (++colons > 2) error(cur(), "invalid slice");
        continue;
      }
      if (parts[size_t(colons)]) error(cur(), str_cat("expected ']', got ", describe(cur())));
      parts[size_t(colons)] = parse_expression(true);
      if (colons == 0 && is_op(",")) error(cur(), "tuple subscripts are not supported");
    }
    next();
    if (colons == 0) {
      if (!parts[0]) error(at, "expected a subscript expression");
      auto e = make(Expr::Kind::item, at);
      e->a = std::move(node);
      e->b = std::move(parts[0]);
      return seal(std::move(e));
    }
    auto e = make(Expr::Kind::slice, at);
    e->a = std::move(node);
    e->items = std::move(parts);
    return seal(std::move(e));
  }

  // Arguments "(a, b, k=v)" into e->items / e->kwargs.
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error(cur(), "*args / **kwargs in calls are not supported");
      if (cur().kind == TokenKind::name && peek().kind == TokenKind::op && peek().text == "=") {
        std::string key = next().text;
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) error(cur(), "positional argument follows keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(Expr::Kind::call, cur());
    e->a = std::move(node);
    parse_call_args(*e);
    return seal(std::move(e));
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        next();
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter(ExprPtr node) {
    auto e = make(Expr::Kind::filter, cur());
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += '.';
      e->name += expect_name();
    }
    e->a = std::move(node);
    e->filter_fn = find_filter(e->name);
    if (is_op("(")) parse_call_args(*e);
    return seal(std::move(e));
  }

  ExprPtr parse_test(ExprPtr node) {
    const Token& at = next();  // is
    auto e = make(Expr::Kind::test, at);
    e->negated = skip_name("not");
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += '.';
      e->name += expect_name();
    }
    e->a = std::move(node);
    e->test_fn = find_test(e->name);
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(*e);
    } else if ((t.kind == TokenKind::name || t.kind == TokenKind::string ||
                t.kind == TokenKind::integer || t.kind == TokenKind::floating ||
                (t.kind == TokenKind::op && (t.text == "[" || t.text == "{"))) &&
               !(t.kind == TokenKind::name && (t.text == "else" || t.text == "or" || t.text == "and"))) {
      if (t.kind == TokenKind::name && t.text == "is") error(t, "You cannot chain multiple tests with is");
      ExprPtr arg = parse_primary();
      e->items.push_back(parse_postfix(std::move(arg)));
    }
    return seal(std::move(e));
  }
};

}  // namespace

const char* op_symbol(Op op) {
  switch (op) {
    case Op::add: case Op::pos: return "+";
    case Op::sub: case Op::neg: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    case Op::floordiv: return "//";
    case Op::mod: return "%";
    case Op::pow: return "**";
    case Op::concat: return "~";
    case Op::and_: return "and";
    case Op::or_: return "or";
    case Op::not_: return "not";
    case Op::eq: return "==";
    case Op::ne: return "!=";
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::gt: return ">";
    case Op::ge: return ">=";
    case Op::in: return "in";
    case Op::not_in: return "not in";
    case Op::none: break;
  }
  return "?";
}

Body parse_tokens(const std::vector<Token>& tokens, const std::string& template_name) {
  return Parser(tokens, template_name).parse_all();
}

}  // namespace brisk::jinja
