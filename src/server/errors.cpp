#include "server/errors.h"

namespace brisk::server {

void bad_request(const std::string& param, const std::string& message) {
  throw HttpError(400, message, param);
}

std::string error_type(Dialect dialect, int status) {
  if (dialect == Dialect::anthropic) {
    switch (status) {
      case 400: return "invalid_request_error";
      case 401: return "authentication_error";
      case 403: return "permission_error";
      case 404: return "not_found_error";
      case 413: return "request_too_large";
      case 429: return "rate_limit_error";
      case 503: return "overloaded_error";
      case 529: return "overloaded_error";
      default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
  }
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "server_overloaded";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

nlohmann::json error_body(Dialect dialect, int status, const std::string& message, const std::string& param) {
  if (dialect == Dialect::ollama) return {{"error", message}};
  if (dialect == Dialect::anthropic)
    return {{"type", "error"}, {"error", {{"type", error_type(dialect, status)}, {"message", message}}}};
  nlohmann::json e = {{"message", message}, {"type", error_type(dialect, status)},
                      {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                      {"code", nullptr}};
  if (status == 404 && param == "model") e["code"] = "model_not_found";
  if (status == 400 && message.find("context") != std::string::npos) e["code"] = "context_length_exceeded";
  return {{"error", e}};
}

}  // namespace brisk::server
