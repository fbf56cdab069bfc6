#include "text/jinja/interpreter.h"

#include "core/error.h"
#include "text/jinja/builtins.h"

namespace brisk::jinja {

// ---- ArgReader ----------------------------------------------------------------------------

ArgReader::ArgReader(const CallArgs& args, std::string_view function,
                     std::initializer_list<std::string_view> names, bool allow_extra_positional)
    : args_(args), names_(names) {
  if (!allow_extra_positional && args.positional.size() > names_.size())
    fail(function, "() takes at most ", names_.size(), " argument(s) (", args.positional.size(),
         " given)");
  for (const auto& [key, value] : args.keywords) {
    bool known = false;
    for (size_t i = 0; i < names_.size(); ++i) {
      if (names_[i] != key) continue;
      known = true;
      if (i < args.positional.size())
        fail(function, "() got multiple values for argument '", key, "'");
    }
    if (!known) fail(function, "() got an unexpected keyword argument '", key, "'");
  }
}

const Value* ArgReader::get(size_t index) const {
  if (index < args_.positional.size()) return &args_.positional[index];
  if (index >= names_.size()) return nullptr;
  for (const auto& [key, value] : args_.keywords)
    if (key == names_[index]) return &value;
  return nullptr;
}

Value ArgReader::get_or(size_t index, Value fallback) const {
  const Value* v = get(index);
  return v ? *v : std::move(fallback);
}

// ---- Interpreter --------------------------------------------------------------------------

struct CallDepthGuard {
  Interpreter& in;
  explicit CallDepthGuard(Interpreter& interp) : in(interp) {
    if (++in.call_depth_ > in.limits_.max_call_depth)
      fail("maximum recursion depth exceeded (", in.limits_.max_call_depth, " nested calls)");
  }
  ~CallDepthGuard() { --in.call_depth_; }
};

Interpreter::Interpreter(const Value& globals, const std::string& template_name,
                         const RenderLimits& limits)
    : globals_(globals), name_(template_name), limits_(limits) {
  frame_ = std::make_shared<Frame>();
}

Interpreter::~Interpreter() {
  for (const FramePtr& f : closures_) {
    f->vars.clear();
    f->parent.reset();
  }
  for (const NamespacePtr& ns : namespaces_) ns->attrs = Dict();
}

void Interpreter::render(const Body& body, std::string& out) {
  try {
    exec_body(body, out);
  } catch (const Error& e) {
    fail(name_, ":", pos_.line, ":", pos_.column, ": ", e.what());
  }
}

void Interpreter::step() {
  if (++steps_ > limits_.max_steps)
    fail("template exceeded the work limit (", limits_.max_steps, " steps)");
}

void Interpreter::charge(uint64_t bytes) {
  if (bytes > limits_.max_output_bytes)
    fail("string of ", bytes, " bytes exceeds the limit of ", limits_.max_output_bytes);
  steps_ += bytes / 64;
  step();
}

Interpreter::Flow Interpreter::exec_body(const Body& body, std::string& out) {
  for (const auto& s : body) {
    Flow f = exec(*s, out);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s, std::string& out) {
  step();
  switch (s.kind) {
    case Stmt::Kind::output:
      out += s.text;
      break;
    case Stmt::Kind::print: {
      Value v = eval(*s.expr);
      v.append_str(out);
      break;
    }
    case Stmt::Kind::if_:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond).truthy()) return exec_body(body, out);
      return exec_body(s.else_body, out);
    case Stmt::Kind::for_: {
      Value iterable = eval(*s.expr);
      pos_ = s.pos;
      exec_for(s, iterable, 1, out);
      break;
    }
    case Stmt::Kind::set:
    case Stmt::Kind::set_block:
      exec_set(s, out);
      break;
    case Stmt::Kind::macro:
      frame_->vars[s.text] = make_macro(s, frame_);
      break;
    case Stmt::Kind::call_block: {
      // The body becomes `caller`, passed to the called macro.
      const Expr& call_expr = *s.expr;
      Value callee = eval(*call_expr.a);
      CallArgs args = eval_args(call_expr);
      auto c = std::make_shared<Callable>();
      c->kind = Callable::Kind::macro;
      c->name = "caller";
      FramePtr closure = frame_;
      closures_.push_back(closure);
      const Stmt* stmt = &s;
      c->fn = [this, stmt, closure](Interpreter&, CallArgs& a) {
        return call_macro(*stmt, closure, a, Value(), true);
      };
      args.keywords.emplace_back("caller", Value(std::move(c)));
      pos_ = s.pos;
      call(callee, args).append_str(out);
      break;
    }
    case Stmt::Kind::filter_block: {
      std::string body;
      exec_body(s.body, body);
      block_values_.push_back(Value(std::move(body)));
      Value v = eval(*s.expr);
      block_values_.pop_back();
      v.append_str(out);
      break;
    }
    case Stmt::Kind::with: {
      auto frame = std::make_shared<Frame>();
      frame->parent = frame_;
      for (const auto& [target, value] : s.assignments) {
        Value v = eval(*value);
        FramePtr saved = frame_;
        frame_ = frame;
        assign(*target, std::move(v));
        frame_ = saved;
      }
      FramePtr saved = frame_;
      frame_ = frame;
      Flow f = exec_body(s.body, out);
      frame_ = saved;
      return f;
    }
    case Stmt::Kind::break_:
      return Flow::break_loop;
    case Stmt::Kind::continue_:
      return Flow::continue_loop;
    case Stmt::Kind::scope:
      return exec_body(s.body, out);
  }
  if (out.size() > limits_.max_output_bytes)
    fail("output exceeds the limit of ", limits_.max_output_bytes, " bytes");
  return Flow::normal;
}

void Interpreter::exec_for(const Stmt& s, const Value& iterable, uint32_t depth,
                           std::string& out) {
  // Shares a plain list's items (lists are immutable); other iterables are materialised.
  std::shared_ptr<const std::vector<Value>> shared_items;
  if (iterable.is_list() && !iterable.as_list()->generator && !s.cond) {
    shared_items = std::shared_ptr<const std::vector<Value>>(iterable.as_list(), &iterable.as_list()->items);
  } else {
    std::vector<Value> items = iterate(iterable);
    if (s.cond) {
      // The loop filter sees the loop variables but not `loop`.
      std::vector<Value> kept;
      FramePtr saved = frame_;
      for (auto& item : items) {
        step();
        frame_ = std::make_shared<Frame>();
        frame_->parent = saved;
        assign(*s.target, item);
        bool keep = eval(*s.cond).truthy();
        frame_ = saved;
        if (keep) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  }
  if (shared_items->empty()) {
    exec_body(s.else_body, out);
    return;
  }
  const int64_t n = int64_t(shared_items->size());
  auto state = std::make_shared<LoopState>();
  state->length = n;
  state->depth = int64_t(depth);
  state->items = shared_items;
  state->cycle = std::make_shared<Callable>();
  state->cycle->name = "cycle";
  std::weak_ptr<LoopState> weak_state = state;
  state->cycle->fn = [weak_state](Interpreter&, CallArgs& a) -> Value {
    auto st = weak_state.lock();
    BRISK_CHECK(st, "loop.cycle() called after its loop ended");
    BRISK_CHECK(!a.positional.empty(), "no items for cycling given");
    return a.positional[size_t(st->index0) % a.positional.size()];
  };
  auto last_changed = std::make_shared<std::optional<Value>>();
  state->changed = std::make_shared<Callable>();
  state->changed->name = "changed";
  state->changed->fn = [last_changed](Interpreter&, CallArgs& a) -> Value {
    Value now = Value::list(a.positional);
    if (*last_changed && values_equal(**last_changed, now)) return Value(false);
    *last_changed = now;
    return Value(true);
  };
  auto loop = std::make_shared<Callable>();
  loop->name = "loop";
  loop->loop = state;
  const Stmt* stmt = &s;
  if (s.recursive) {
    loop->fn = [this, stmt, depth](Interpreter&, CallArgs& a) -> Value {
      BRISK_CHECK(a.positional.size() == 1 && a.keywords.empty(), "loop() takes exactly one argument");
      CallDepthGuard guard(*this);
      std::string o;
      FramePtr keep = frame_;
      exec_for(*stmt, a.positional[0], depth + 1, o);
      frame_ = keep;
      return Value(std::move(o));
    };
  } else {
    loop->fn = [](Interpreter&, CallArgs&) -> Value {
      fail("the loop is not recursive: loop() can only be called in a 'recursive' for loop");
    };
  }
  Value loop_value(std::move(loop));
  FramePtr saved = frame_;
  for (int64_t i = 0; i < n; ++i) {
    step();
    state->index0 = i;
    auto frame = std::make_shared<Frame>();
    frame->parent = saved;
    frame_ = frame;
    assign(*s.target, (*shared_items)[size_t(i)]);
    frame->vars["loop"] = loop_value;
    Flow f = exec_body(s.body, out);
    frame_ = saved;
    if (f == Flow::break_loop) break;
  }
  frame_ = saved;
}

void Interpreter::exec_set(const Stmt& s, std::string& out) {
  if (s.kind == Stmt::Kind::set) {
    Value v = eval(*s.expr);
    pos_ = s.pos;
    assign(*s.target, std::move(v));
    return;
  }
  std::string body;
  exec_body(s.body, body);
  Value v(std::move(body));
  if (s.expr) {
    block_values_.push_back(std::move(v));
    v = eval(*s.expr);
    block_values_.pop_back();
  }
  pos_ = s.pos;
  assign(*s.target, std::move(v));
}

void Interpreter::assign(const Expr& target, Value value) {
  switch (target.kind) {
    case Expr::Kind::name:
      frame_->vars[target.name] = std::move(value);
      return;
    case Expr::Kind::tuple: {
      std::vector<Value> parts = iterate(value);
      if (parts.size() != target.items.size())
        fail(parts.size() > target.items.size() ? "too many" : "not enough",
             " values to unpack (expected ", target.items.size(), ", got ", parts.size(), ")");
      for (size_t i = 0; i < parts.size(); ++i) assign(*target.items[i], std::move(parts[i]));
      return;
    }
    case Expr::Kind::attr: {
      Value obj = lookup(target.a->name);
      if (!obj.is_namespace()) fail("cannot assign attribute on non-namespace object");
      obj.as_namespace()->attrs.set(Value(target.name), std::move(value));
      return;
    }
    default:
      fail("cannot assign to this expression");
  }
}

Value Interpreter::make_macro(const Stmt& s, FramePtr closure, const Stmt*, Value) {
  auto c = std::make_shared<Callable>();
  c->kind = Callable::Kind::macro;
  c->name = s.text;
  const Stmt* stmt = &s;
  closures_.push_back(closure);
  c->fn = [this, stmt, closure](Interpreter&, CallArgs& a) {
    return call_macro(*stmt, closure, a, Value(), false);
  };
  return Value(std::move(c));
}

Value Interpreter::call_macro(const Stmt& s, const FramePtr& closure, CallArgs& args,
                              const Value&, bool is_caller) {
  CallDepthGuard guard(*this);
  auto frame = std::make_shared<Frame>();
  frame->parent = closure;
  const auto& params = s.params;
  std::vector<Value> varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) frame->vars[params[i].name] = args.positional[i];
    else varargs.push_back(args.positional[i]);
  }
  auto kwargs = std::make_shared<Dict>();
  for (auto& [key, value] : args.keywords) {
    if (key == "caller" && !is_caller) {
      frame->vars["caller"] = value;
      continue;
    }
    bool is_param = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name != key) continue;
      if (i < args.positional.size())
        fail("macro '", s.text, "' got multiple values for argument '", key, "'");
      frame->vars[key] = value;
      is_param = true;
    }
    if (!is_param) kwargs->set(Value(key), value);
  }
  FramePtr saved = frame_;
  frame_ = frame;
  for (size_t i = args.positional.size(); i < params.size(); ++i) {
    if (frame->vars.count(params[i].name)) continue;
    frame->vars[params[i].name] =
        params[i].default_value
            ? eval(*params[i].default_value)
            : Value::undefined(str_cat("parameter '", params[i].name, "' was not provided"));
  }
  frame->vars["varargs"] = Value::list(std::move(varargs), true);
  frame->vars["kwargs"] = Value(std::move(kwargs));
  std::string out;
  exec_body(s.body, out);
  frame_ = saved;
  return Value(std::move(out));
}

Value Interpreter::lookup(const std::string& name) const {
  for (const Frame* f = frame_.get(); f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (const Value* v = globals_.as_dict()->find(std::string_view(name))) return *v;
  if (const Value* v = find_global_function(name)) return *v;
  return Value::undefined("'" + name + "' is undefined");
}

// ---- expressions --------------------------------------------------------------------------

namespace {

std::string undefined_message(const Value& v) {
  return v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint();
}

std::string object_name(const Value& v) { return v.type_name() + " object"; }

template <class Missing>
Value loop_attribute(const LoopState& l, const std::string& name, Missing&& missing) {
  const int64_t i = l.index0, n = l.length;
  if (name == "index") return Value(i + 1);
  if (name == "index0") return Value(i);
  if (name == "first") return Value(i == 0);
  if (name == "last") return Value(i == n - 1);
  if (name == "length") return Value(n);
  if (name == "revindex") return Value(n - i);
  if (name == "revindex0") return Value(n - i - 1);
  if (name == "depth") return Value(l.depth);
  if (name == "depth0") return Value(l.depth - 1);
  if (name == "previtem")
    return i > 0 ? (*l.items)[size_t(i - 1)] : Value::undefined("there is no previous item");
  if (name == "nextitem")
    return i + 1 < n ? (*l.items)[size_t(i + 1)] : Value::undefined("there is no next item");
  if (name == "cycle") return Value(l.cycle);
  if (name == "changed") return Value(l.changed);
  return missing();
}

}  // namespace

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail(undefined_message(obj));
  auto missing = [&]() {
    return Value::undefined("'" + object_name(obj) + "' has no attribute '" + name + "'");
  };
  if (!name.empty() && name[0] == '_') return missing();
  switch (obj.kind()) {
    case Value::Kind::dict: {
      if (auto m = find_method(obj, name)) return *m;
      if (const Value* v = obj.as_dict()->find(std::string_view(name))) return *v;
      return missing();
    }
    case Value::Kind::ns: {
      if (const Value* v = obj.as_namespace()->attrs.find(std::string_view(name))) return *v;
      return missing();
    }
    case Value::Kind::callable: {
      if (const auto& loop = obj.as_callable()->loop) return loop_attribute(*loop, name, missing);
      if (obj.as_callable()->attrs)
        if (const Value* v = obj.as_callable()->attrs->find(std::string_view(name))) return *v;
      return missing();
    }
    case Value::Kind::string:
    case Value::Kind::list:
      if (auto m = find_method(obj, name)) return *m;
      return missing();
    default:
      return missing();
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail(undefined_message(obj));
  switch (obj.kind()) {
    case Value::Kind::dict: {
      if (key.is_list() || key.is_dict()) fail("unhashable type: '", key.type_name(), "'");
      if (const Value* v = obj.as_dict()->find(key)) return *v;
      break;
    }
    case Value::Kind::list:
    case Value::Kind::string: {
      if (obj.is_list() && obj.as_list()->generator) break;
      if (!key.is_int() && !key.is_bool()) break;
      int64_t idx = key.int_value();
      if (obj.is_list()) {
        const auto& items = obj.as_list()->items;
        int64_t n = int64_t(items.size());
        if (idx < 0) idx += n;
        if (idx >= 0 && idx < n) return items[size_t(idx)];
        return Value::undefined(str_cat("'", object_name(obj), "' has no element ", key.int_value()));
      }
      Value sliced = slice_value(obj, Value(idx), idx == -1 ? Value::none() : Value(idx + 1), Value::none());
      if (!sliced.as_string().empty()) return sliced;
      return Value::undefined(str_cat("'str object' has no element ", key.int_value()));
    }
    case Value::Kind::ns:
    case Value::Kind::callable:
      if (key.is_string()) return getattr(obj, key.as_string());
      break;
    default:
      break;
  }
  if (key.is_string()) {
    if (!key.as_string().empty() && key.as_string()[0] == '_') {
    } else if (obj.is_string() || obj.is_list() || obj.is_dict()) {
      if (auto m = find_method(obj, key.as_string())) return *m;
    }
    return Value::undefined(str_cat("'", object_name(obj), "' has no attribute '", key.as_string(), "'"));
  }
  return Value::undefined(str_cat("'", object_name(obj), "' has no element ", key.repr()));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  step();
  if (callee.is_undefined()) fail(undefined_message(callee));
  if (!callee.is_callable()) fail("'", callee.type_name(), "' object is not callable");
  return callee.as_callable()->fn(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  FilterFn f = find_filter(name);
  if (!f) fail("no filter named '", name, "'");
  return f(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
  TestFn t = find_test(name);
  if (!t) fail("no test named '", name, "'");
  return t(*this, input, args);
}

CallArgs Interpreter::eval_args(const Expr& e) {
  CallArgs args;
  args.positional.reserve(e.items.size());
  for (const auto& a : e.items) args.positional.push_back(eval(*a));
  for (const auto& [k, v] : e.kwargs) args.keywords.emplace_back(k, eval(*v));
  return args;
}

Value Interpreter::eval_call(const Expr& e) {
  Value callee = eval(*e.a);
  CallArgs args = eval_args(e);
  pos_ = e.pos;
  return call(callee, args);
}

Value Interpreter::eval_binary(const Expr& e) {
  if (e.op == Op::and_) {
    Value l = eval(*e.a);
    return l.truthy() ? eval(*e.b) : l;
  }
  if (e.op == Op::or_) {
    Value l = eval(*e.a);
    return l.truthy() ? l : eval(*e.b);
  }
  Value l = eval(*e.a);
  Value r = eval(*e.b);
  pos_ = e.pos;
  return binary_op(*this, e.op, l, r);
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.a);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.items[i]);
    pos_ = e.pos;
    const Op op = e.ops[i];
    bool r;
    if (op == Op::eq) r = values_equal(left, right);
    else if (op == Op::ne) r = !values_equal(left, right);
    else if (op == Op::in) r = contains(right, left);
    else if (op == Op::not_in) r = !contains(right, left);
    else {
      if (left.is_undefined()) fail(undefined_message(left));
      if (right.is_undefined()) fail(undefined_message(right));
      int c = values_compare(left, right);
      if (op == Op::lt) r = c < 0;
      else if (op == Op::le) r = c <= 0;
      else if (op == Op::gt) r = c > 0;
      else r = c >= 0;
    }
    if (!r) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Interpreter::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::literal: return e.value;
    case Expr::Kind::name: return lookup(e.name);
    case Expr::Kind::list:
    case Expr::Kind::tuple: {
      std::vector<Value> items;
      items.reserve(e.items.size());
      for (const auto& x : e.items) items.push_back(eval(*x));
      return Value::list(std::move(items), e.kind == Expr::Kind::tuple);
    }
    case Expr::Kind::dict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value k = eval(*e.items[i]);
        Value v = eval(*e.items[i + 1]);
        pos_ = e.items[i]->pos;
        if (k.is_list() || k.is_dict() || k.is_undefined())
          fail("unhashable type: '", k.type_name(), "'");
        d->set(std::move(k), std::move(v));
      }
      return Value(std::move(d));
    }
    case Expr::Kind::attr: {
      Value obj = eval(*e.a);
      pos_ = e.pos;
      return getattr(obj, e.name);
    }
    case Expr::Kind::item: {
      Value obj = eval(*e.a);
      Value key = eval(*e.b);
      pos_ = e.pos;
      return getitem(obj, key);
    }
    case Expr::Kind::slice: {
      Value obj = eval(*e.a);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i) parts[i] = e.items[i] ? eval(*e.items[i]) : Value::none();
      pos_ = e.pos;
      if (obj.is_undefined()) fail(undefined_message(obj));
      return slice_value(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::call: return eval_call(e);
    case Expr::Kind::filter: {
      Value input = e.a ? eval(*e.a) : block_values_.back();
      CallArgs args = eval_args(e);
      pos_ = e.pos;
      step();
      if (!e.filter_fn) fail("no filter named '", e.name, "'");
      return e.filter_fn(*this, input, args);
    }
    case Expr::Kind::test: {
      Value input = eval(*e.a);
      CallArgs args = eval_args(e);
      pos_ = e.pos;
      if (!e.test_fn) fail("no test named '", e.name, "'");
      bool r = e.test_fn(*this, input, args);
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::unary: {
      Value v = eval(*e.a);
      pos_ = e.pos;
      if (e.op == Op::not_) return Value(!v.truthy());
      if (v.is_undefined()) fail(undefined_message(v));
      if (v.is_float()) return Value(e.op == Op::neg ? -v.as_float() : v.as_float());
      if (v.is_int() || v.is_bool()) {
        int64_t x = v.int_value();
        if (e.op == Op::pos) return Value(x);
        if (x == INT64_MIN) fail("integer overflow");
        return Value(-x);
      }
      fail("bad operand type for unary ", op_symbol(e.op), ": '", v.type_name(), "'");
    }
    case Expr::Kind::binary: return eval_binary(e);
    case Expr::Kind::compare: return eval_compare(e);
    case Expr::Kind::cond: {
      if (eval(*e.a).truthy()) return eval(*e.b);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined");
    }
    case Expr::Kind::block_value:
      BRISK_CHECK(!block_values_.empty(), "filter chain outside of a block");
      return block_values_.back();
  }
  fail("unknown expression");
}

}  // namespace brisk::jinja
