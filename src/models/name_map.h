// Hugging Face parameter names -> GGUF (llama.cpp) tensor names for the Llama family layout
// (model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight). Architectures with other
// module names extend it in their own file. Unknown names map to "" (dropped).
#pragma once
#include <string>

namespace brisk {

std::string hf_to_gguf_name(const std::string& hf_name);
// A backbone checkpoint saved without its LM head (AutoModel: an embedding model) names its
// tensors without the "model." prefix (embed_tokens.weight, layers.N...., norm.weight): those
// names get the prefix; every other name is returned as it is.
std::string hf_backbone_name(const std::string& hf_name);

}  // namespace brisk
