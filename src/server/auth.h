// API key check: `Authorization: Bearer KEY` (OpenAI clients) or `x-api-key: KEY`
// (Anthropic clients), compared in constant time.
#pragma once
#include <string>
#include <string_view>

namespace brisk::server {

bool keys_equal(std::string_view a, std::string_view b);
// Whether the headers carry `key`. `authorization` / `x_api_key` are the header values ("" if absent).
bool request_authorized(std::string_view key, std::string_view authorization, std::string_view x_api_key);

}  // namespace brisk::server
