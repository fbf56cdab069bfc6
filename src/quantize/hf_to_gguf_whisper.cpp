// Hugging Face Whisper folder -> float32 GGUF (general.architecture "whisper"), the input of
// `brisk quantize FOLDER OUT TYPE` for speech checkpoints:
//   - tensors renamed by the architecture's name map (models/whisper.cpp: enc.* for the
//     encoder, blk.* / token_embd / position_embd / output_norm for the decoder), convolution
//     weights kept 3-D ({3, in_channels, d_model});
//   - the sizes under the GGUF keys of the config table (models/config.cpp): whisper.block_count
//     and attention.head_count / feed_forward_length / context_length for the decoder,
//     whisper.encoder.* for the encoder, whisper.encoder.mel_bins, embedding_length (d_model);
//   - config.json, generation_config.json and preprocessor_config.json kept whole as JSON strings
//     under whisper.hf.config / whisper.hf.generation_config / whisper.hf.preprocessor_config
//     (token ids, suppress lists, alignment heads and the front end, as Model::load reads them
//     from a folder);
//   - the tokenizer as tokenizer.ggml.* (byte-level BPE, pre-tokenizer "gpt-2").
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/safetensors.h"
#include "models/config.h"
#include "models/registry.h"
#include "quantize/hf_to_gguf.h"
#include "formats/tokenizer_to_gguf.h"

namespace brisk {

void hf_to_gguf_encoder_decoder_f32(const std::string& folder, const std::string& out_path, const ArchEntry& arch) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  const nlohmann::json cfg = read_json_file((dir / "config.json").string());
  const ArchEntry* entry = &arch;
  BRISK_CHECK(entry->hf_name_map && !entry->convert.arch.empty(), "convert: ", entry->name,
              " has no name map or GGUF architecture name");
  ModelConfig c;
  config_fill_from_hf(c, cfg);
  BRISK_CHECK(c.d_model > 0 && c.n_dec_layer > 0 && c.n_enc_layer > 0 && c.n_mels > 0, folder,
              "/config.json: missing whisper sizes (d_model, decoder_layers, encoder_layers, num_mel_bins)");
  const auto ckpt = safetensors::Checkpoint::open(folder, MappedFile::Mode::mmap);
  if (c.n_vocab == 0)
    if (const auto* e = ckpt.find("model.decoder.embed_tokens.weight"); e && e->shape.size() == 2) c.n_vocab = int32_t(e->shape[0]);

  gguf::Writer w;
  const std::string& a = entry->convert.arch;
  auto u32 = [](int32_t v) { return gguf::Value::from_u32(uint32_t(v)); };
  w.set("general.architecture", gguf::Value::from_string(a));
  w.set("general.name", gguf::Value::from_string(dir.filename().string()));
  w.set(a + ".embedding_length", u32(c.d_model));
  w.set(a + ".block_count", u32(c.n_dec_layer));
  w.set(a + ".attention.head_count", u32(c.n_dec_head));
  w.set(a + ".feed_forward_length", u32(c.n_dec_ff));
  w.set(a + ".context_length", u32(c.n_dec_ctx));
  w.set(a + ".encoder.block_count", u32(c.n_enc_layer));
  w.set(a + ".encoder.attention.head_count", u32(c.n_enc_head));
  w.set(a + ".encoder.feed_forward_length", u32(c.n_enc_ff));
  w.set(a + ".encoder.context_length", u32(c.n_enc_ctx));
  w.set(a + ".encoder.mel_bins", u32(c.n_mels));
  w.set(a + ".scale_embedding", gguf::Value::from_bool(c.scale_embedding));
  w.set(a + ".activation_function", gguf::Value::from_string(c.activation_function.empty() ? "gelu" : c.activation_function));
  if (c.n_vocab > 0) w.set(a + ".vocab_size", u32(c.n_vocab));
  w.set(a + ".hf.config", gguf::Value::from_string(cfg.dump()));
  for (const char* side : {"generation_config", "preprocessor_config"}) {
    const fs::path p = dir / (std::string(side) + ".json");
    if (fs::exists(p)) w.set(a + ".hf." + side, gguf::Value::from_string(read_json_file(p.string()).dump()));
  }
  w.set("general.file_type", gguf::Value::from_u32(0));
  if (fs::exists(dir / "tokenizer.json"))
    tokenizer_to_gguf({.folder = folder, .pre = "gpt-2", .n_vocab = c.n_vocab}, w);

  std::vector<std::unique_ptr<std::vector<float>>> keep;
  for (const auto& t : ckpt.tensors()) {
    const std::string name = entry->hf_name_map(t.name);
    if (name.empty()) continue;
    BRISK_CHECK(!t.shape.empty() && t.shape.size() <= gguf::kMaxDims, "convert: ", t.name, " has ", t.shape.size(), " dims");
    keep.push_back(std::make_unique<std::vector<float>>(safetensors::to_f32(t)));
    const std::vector<uint64_t> ne(t.shape.rbegin(), t.shape.rend());  // GGUF order: innermost first
    w.add_tensor(name, QuantType::F32, ne, keep.back()->data(), keep.back()->size() * 4);
  }
  w.write(out_path);
}

}  // namespace brisk
