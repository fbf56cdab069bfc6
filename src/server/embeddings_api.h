// The embedding and rerank routes (embeddings_api.cpp): POST /v1/embeddings (OpenAI),
// POST /v1/rerank, /rerank, /v2/rerank (the llama.cpp / vLLM / Cohere shape), and the replies of
// Ollama's POST /api/embed and /api/embeddings (ollama_api.cpp routes them here).
#pragma once
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/http_server.h"

namespace brisk::server {

// Ollama: `legacy` is /api/embeddings ({prompt} -> {embedding}), else /api/embed ({input} ->
// {embeddings}, L2-normalised as Ollama does, truncated unless truncate is false).
void ollama_embed_reply(ServerState& state, const nlohmann::json& body, const std::string& served, bool legacy,
                        httplib::Response& res);

}  // namespace brisk::server
