#include "quantize/quantize_gguf.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "formats/model_format.h"
#include "models/registry.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/quantize_rows.h"

namespace brisk {

namespace {

namespace fs = std::filesystem;

bool is_float_type(QuantType t) { return t == QuantType::F32 || t == QuantType::F16 || t == QuantType::BF16; }

// The output must not be the input: the same path, or another name of the same file.
void check_not_same_file(const std::string& in, const std::string& out) {
  std::error_code ec;
  const bool same = fs::weakly_canonical(in, ec) == fs::weakly_canonical(out, ec) ||
                    (fs::exists(out, ec) && fs::equivalent(in, out, ec));
  BRISK_CHECK(!same, "quantize: the output ", out, " is the input file ", in, ": write to a new file");
}

}  // namespace

QuantizeReport quantize_gguf(const QuantizeParams& params) {
  const ModelFormat format = model_format_detect(params.in);
  if (format != ModelFormat::gguf) {
    // A Hugging Face folder: convert to a float32 GGUF beside the output, then quantize it.
    const std::string folder = hf_folder_of(params.in, format);
    const std::string tmp = params.out + ".f32.tmp";
    check_not_same_file(folder, params.out);
    if (params.on_progress) params.on_progress({.converting = true, .done = 0, .total = 0, .name = folder});
    hf_to_gguf_f32(folder, tmp);
    QuantizeParams p = params;
    p.in = tmp;
    try {
      const QuantizeReport r = quantize_gguf(p);
      std::filesystem::remove(tmp);
      return r;
    } catch (...) {
      std::filesystem::remove(tmp);
      throw;
    }
  }
  check_not_same_file(params.in, params.out);
  const auto in = gguf::File::open(params.in, MappedFile::Mode::mmap);
  BRISK_CHECK(!in.architecture().empty(), params.in, ": no general.architecture in the GGUF metadata: nothing written");
  BRISK_CHECK(arch_find_gguf(in.architecture()) != nullptr, params.in, ": architecture '", in.architecture(),
              "' is not supported by brisk: nothing written");
  QuantizeReport report;
  for (const auto& t : in.tensors()) {
    if (is_float_type(t.type)) continue;
    BRISK_CHECK(params.allow_requantize, params.in, " is already quantized (tensor '", t.name, "' is ",
                quant_type_info(t.type).name,
                "): requantizing compounds the rounding; quantize from the F32/F16/BF16 model, or pass "
                "--allow-requantize");
    ++report.n_requantized;
  }
  std::vector<RecipeTensor> list;
  for (const auto& t : in.tensors()) list.push_back({.name = t.name, .ne = t.ne});
  RecipeChooser chooser(params.recipe, list);

  gguf::Writer w;
  w.set_alignment(in.alignment());
  for (const auto& [key, value] : in.metadata())
    if (key != "general.alignment") w.set(key, value);
  w.set("general.file_type", gguf::Value::from_u32(params.recipe.ftype));
  w.set("general.quantization_version", gguf::Value::from_u32(2));

  ThreadPool pool(params.n_threads);
  std::vector<std::vector<uint8_t>> buffers;
  buffers.reserve(in.tensors().size());
  for (const auto& t : in.tensors()) {
    BRISK_CHECK(!t.ne.empty() && t.ne[0] > 0, params.in, ": tensor '", t.name, "' has an empty shape");
    if (params.on_progress)
      params.on_progress({.converting = false, .done = buffers.size(), .total = in.tensors().size(), .name = t.name});
    const QuantType to = chooser.choose(t.name, t.type);
    const int64_t n_per_row = int64_t(t.ne[0]);
    const int64_t n_rows = int64_t(t.n_elements / t.ne[0]);
    BRISK_CHECK(quant_row_bytes(t.type, t.ne[0]).has_value(), params.in, ": tensor '", t.name,
                "' rows are not whole blocks of ", quant_type_info(t.type).name);
    buffers.push_back(convert_rows(t.type, t.data, to, n_rows, n_per_row, pool));
    w.add_tensor(t.name, to, t.ne, buffers.back().data(), buffers.back().size());
    report.bytes_in += t.n_bytes;
    report.bytes_out += buffers.back().size();
    ++report.type_counts[std::string(quant_type_info(to).name)];
  }
  report.n_fallback = chooser.n_fallback();
  w.write(params.out);
  return report;
}

}  // namespace brisk
