// `brisk dump MODEL --prompt-ids 1,2,3 --out DIR`: runs the prompt once and writes every
// tapped intermediate (llama.cpp names: inp_embd, attn_norm, Qcur, Kcur, Vcur, kqv_out,
// attn_out, ffn_inp, ffn_norm, ffn_act, ffn_out, l_out, result_norm, result_output) as raw
// little-endian float32 [rows, cols] files, plus index.json listing name, layer, shape and
// file, for layer-by-layer comparison with a reference implementation.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "runtime/engine_api.h"

namespace {

int cmd_dump(const std::vector<std::string>& argv) {
  std::string model_ref, ids_text, out_dir, quant, device = "cpu";
  brisk::cli::ArgParser p("dump", "MODEL --prompt-ids 1,2,3 --out DIR [options]",
                          "Runs token ids once and writes every named intermediate as float32, with index.json.");
  p.model(&model_ref, "GGUF file, Hugging Face folder or Hub reference");
  p.text({"--prompt-ids"}, &ids_text, "IDS", "token ids, comma-separated (required)");
  p.text({"--out"}, &out_dir, "DIR", "folder to write (required)");
  p.text({"--quant"}, &quant, "Q", "quantize safetensors weights at load: q8_0 | q4_0 | q4_k");
  brisk::cli::add_device_option(p, &device, "cpu");
  if (!p.parse(argv)) return 0;
  brisk::cli::refuse_device_list("dump", device);
  if (ids_text.empty()) brisk::cli::usage_fail("--prompt-ids is required");
  if (out_dir.empty()) brisk::cli::usage_fail("--out is required");
  std::vector<int32_t> ids;
  std::stringstream ss(ids_text);
  for (std::string item; std::getline(ss, item, ',');)
    ids.push_back(int32_t(brisk::cli::parse_integer("--prompt-ids", item, 0, INT32_MAX)));
  if (ids.empty()) brisk::cli::usage_fail("--prompt-ids: no ids");
  const std::string model_path = brisk::cli::resolve_model(model_ref);
  auto model = brisk::cli::load_model({.path = model_path, .quant = quant});
  auto ctx = brisk::Context::create(model, {.n_ctx = std::max<int32_t>(int32_t(ids.size()), 16), .n_seq_max = 1,
                                            .n_batch = int32_t(ids.size()), .kv_type = brisk::QuantType::F32,
                                            .device = device});
  std::filesystem::create_directories(out_dir);
  nlohmann::json index = nlohmann::json::array();
  ctx->set_tap([&](const std::string& name, int layer, const float* data, int64_t rows, int64_t cols) {
    const std::string file = layer >= 0 ? name + "-" + std::to_string(layer) + ".f32" : name + ".f32";
    std::ofstream out(std::filesystem::path(out_dir) / file, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(sizeof(float) * size_t(rows * cols)));
    BRISK_CHECK(out.good(), "dump: cannot write ", file, " in ", out_dir);
    index.push_back({{"name", name}, {"layer", layer}, {"shape", {rows, cols}}, {"file", file}});
  });
  std::vector<brisk::BatchToken> batch;
  for (size_t i = 0; i < ids.size(); ++i)
    batch.push_back({.token = ids[i], .pos = int32_t(i), .seq = 0, .want_logits = true});
  ctx->decode(batch);
  const nlohmann::json doc = {{"model", model_path}, {"prompt_ids", ids}, {"dtype", "float32"},
                              {"layout", "row-major [rows = tokens, cols]"}, {"tensors", index}};
  std::ofstream(std::filesystem::path(out_dir) / "index.json") << doc.dump(1) << "\n";
  std::printf("wrote %zu tensors to %s\n", index.size(), out_dir.c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("dump", "run token ids once and write every named intermediate (float32 + index.json)", cmd_dump);
