// Parameter specs of forced tool calls (see tool_function_spec.h).
#include "runtime/tool_function_spec.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace brisk {

ToolFunctionSpec tool_function_spec(std::string name, const nlohmann::json* parameters) {
  ToolFunctionSpec f;
  f.name = std::move(name);
  const nlohmann::json* props = nullptr;
  if (parameters && parameters->is_object()) {
    auto it = parameters->find("properties");
    if (it != parameters->end() && it->is_object() && !it->empty() && it->size() <= 64) props = &*it;
  }
  if (!props) {
    f.open_params = true;
    return f;
  }
  const auto ap = parameters->find("additionalProperties");
  f.open_params = ap != parameters->end() && !(ap->is_boolean() && !ap->get<bool>());
  for (auto p = props->begin(); p != props->end(); ++p) {
    ToolParamSpec s;
    s.name = p.key();
    try {
      auto compiled = compile_json_schema(*parameters, p.value());
      if (auto choices = json_schema_string_choices(*compiled)) {
        s.kind = ToolParamSpec::Kind::kChoice;
        s.choices = std::move(*choices);
      } else if (!json_schema_admits_string(*compiled)) {
        s.kind = ToolParamSpec::Kind::kJson;
        s.json = std::move(compiled);
      }
    } catch (const Error&) {
      // Left as raw text.
    }
    // Names a call syntax cannot write back unchanged (parsers trim them) are left out.
    const auto ctl = [](char c) { return uint8_t(c) < 0x21; };
    const bool bad_name = s.name.empty() || s.name.find_first_of("<>") != std::string::npos || ctl(s.name.front()) ||
                          ctl(s.name.back()) || s.name.find('\n') != std::string::npos;
    if (!bad_name) f.params.push_back(std::move(s));
  }
  std::sort(f.params.begin(), f.params.end(), [](const ToolParamSpec& a, const ToolParamSpec& b) { return a.name < b.name; });
  if (auto req = parameters->find("required"); req != parameters->end() && req->is_array()) {
    for (const auto& r : *req) {
      if (!r.is_string()) continue;
      for (size_t i = 0; i < f.params.size(); ++i)
        if (f.params[i].name == r.get_ref<const std::string&>()) f.required |= uint64_t{1} << i;
    }
  }
  return f;
}

}  // namespace brisk
