// Hugging Face parameter names -> GGUF (llama.cpp) tensor names for the Llama family layout
// (model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight). Architectures with other
// module names extend it in their own file. Unknown names map to "" (dropped).
#pragma once
#include <cstddef>
#include <string>

namespace brisk {

std::string hf_to_gguf_name(const std::string& hf_name);
// A backbone checkpoint saved without its LM head (AutoModel: an embedding model) names its
// tensors without the "model." prefix (embed_tokens.weight, layers.N...., norm.weight): those
// names get the prefix; every other name is returned as it is.
std::string hf_backbone_name(const std::string& hf_name);

// One row of a per-layer name table: the module path after "PREFIX<N>." and its GGUF name
// after "blk.<N>." (both ending in '.'; ".weight" / ".bias" follow).
struct LayerNameRow {
  const char* hf;
  const char* gguf;
};
// hf = prefix + N + "." + row.hf + ("weight" | "bias") -> "blk.N." + row.gguf + the same tail;
// "" when hf does not start with prefix and a layer number, or no row matches.
std::string layer_name_map(const std::string& hf, const std::string& prefix, const LayerNameRow* rows, size_t n_rows);
template <size_t N>
std::string layer_name_map(const std::string& hf, const std::string& prefix, const LayerNameRow (&rows)[N]) {
  return layer_name_map(hf, prefix, rows, N);
}

}  // namespace brisk
