// HTTP errors of the server and their bodies in each dialect.
// OpenAI:    {"error": {"message", "type", "param", "code"}}
// Anthropic: {"type": "error", "error": {"type", "message"}}
// Ollama:    {"error": "message"}
// Handlers throw HttpError; the HTTP layer converts it (and any brisk::Error, as a 400 or 500)
// into the body of the dialect of the route.
#pragma once
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace brisk::server {

enum class Dialect { openai, anthropic, ollama };

class HttpError : public std::runtime_error {
 public:
  HttpError(int status, std::string message, std::string param = {})
      : std::runtime_error(message), status_(status), param_(std::move(param)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }

 private:
  int status_;
  std::string param_;
};

// 400 naming the field.
[[noreturn]] void bad_request(const std::string& param, const std::string& message);

nlohmann::json error_body(Dialect dialect, int status, const std::string& message,
                          const std::string& param = {});
// The dialect's error type name for a status (e.g. 404 -> "not_found_error" / "invalid_request_error").
std::string error_type(Dialect dialect, int status);

}  // namespace brisk::server
