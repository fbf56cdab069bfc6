// Registries of the builtin filters, tests, methods and global functions of the Jinja engine,
// and the value operators (arithmetic, containment, slicing) with Python semantics.
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace brisk::jinja {

class Interpreter;

FilterFn find_filter(std::string_view name);  // null when unknown
TestFn find_test(std::string_view name);      // null when unknown

// Attribute `name` of a str/list/dict when it is a method (bound to `self`); nullopt when the
// type has no such method. Mutating methods give an undefined that fails when called, as in
// Jinja2's immutable sandbox.
std::optional<Value> find_method(const Value& self, const std::string& name);

// Global functions: range, dict, namespace, joiner, cycler, raise_exception, strftime_now.
const Value* find_global_function(std::string_view name);

// Arithmetic and concatenation operators (add ... concat).
Value binary_op(Interpreter& in, Op op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);  // Python `item in container`
Value slice_value(const Value& v, const Value& start, const Value& stop, const Value& step);

// Python's printf-style formatting (str % args, the |format filter).
std::string percent_format(Interpreter& in, const std::string& fmt, const Value& args);

// Python's str.format with positional and keyword fields.
std::string brace_format(Interpreter& in, const std::string& fmt, const CallArgs& args);

}  // namespace brisk::jinja
