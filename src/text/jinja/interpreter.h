// Tree-walking evaluator of a parsed template. Scoping follows Jinja2: each for-loop iteration,
// macro call and {% with %} gets a fresh frame whose parent is the enclosing one (so a {% set %}
// in a loop body is gone at the next iteration), {% if %} does not scope, and a macro sees the
// frame it was defined in. Work is bounded by RenderLimits, so hostile templates (huge ranges,
// runaway recursion, exponential strings) fail with an error instead of hanging.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace brisk::jinja {

struct RenderLimits {
  uint64_t max_steps = 5'000'000;         // statements, loop iterations, calls, bytes/64 built
  uint32_t max_call_depth = 256;          // nested macro / recursive-loop calls
  uint64_t max_output_bytes = 64u << 20;   // the output and any string built while rendering
};

// Positional-or-keyword parameters of a builtin filter, test, method or function.
class ArgReader {
 public:
  ArgReader(const CallArgs& args, std::string_view function,
            std::initializer_list<std::string_view> names, bool allow_extra_positional = false);
  const Value* get(size_t index) const;  // the argument for names[index], or null
  Value get_or(size_t index, Value fallback) const;
  size_t n_positional() const { return args_.positional.size(); }

 private:
  const CallArgs& args_;
  std::vector<std::string_view> names_;
};

class Interpreter {
 public:
  Interpreter(const Value& globals, const std::string& template_name, const RenderLimits& limits);
  ~Interpreter();  // breaks the frame <-> macro reference cycles (see closures_)
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  void render(const Body& body, std::string& out);

  // Used by filters, tests and callables.
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
  bool apply_test(const std::string& name, const Value& input, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  void charge(uint64_t bytes);  // counts work for a string of this size; throws when over
  // namespace() objects are the mutable values: one can come to hold itself (ns.self = ns,
  // ns.l = [ns]). The interpreter keeps them and empties them when it is destroyed.
  void track(NamespacePtr ns) { namespaces_.push_back(std::move(ns)); }
  void step();

 private:
  struct Frame {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Frame> parent;
  };
  using FramePtr = std::shared_ptr<Frame>;
  enum class Flow { normal, break_loop, continue_loop };

  const Value& globals_;  // a dict
  std::string name_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
  uint32_t call_depth_ = 0;
  FramePtr frame_;
  // Frames that macros (and call-block callers) close over. A macro is stored in the frame it
  // closes over (so that it can call itself), a shared_ptr cycle; the destructor clears these
  // frames' variables so that they are freed.
  std::vector<FramePtr> closures_;
  std::vector<NamespacePtr> namespaces_;  // see track()
  std::vector<Value> block_values_;  // input of a filter-block / set-block filter chain
  SourcePos pos_;                    // where the operation being evaluated is

  Flow exec_body(const Body& body, std::string& out);
  Flow exec(const Stmt& s, std::string& out);
  void exec_for(const Stmt& s, const Value& iterable, uint32_t depth, std::string& out);
  void exec_set(const Stmt& s, std::string& out);
  void assign(const Expr& target, Value value);
  Value make_macro(const Stmt& s, FramePtr closure, const Stmt* caller_of = nullptr,
                   Value caller = Value());
  Value call_macro(const Stmt& s, const FramePtr& closure, CallArgs& args, const Value& caller,
                   bool is_caller);

  Value eval(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_call(const Expr& e);
  CallArgs eval_args(const Expr& e);
  Value lookup(const std::string& name) const;

  friend struct CallDepthGuard;
};

}  // namespace brisk::jinja
