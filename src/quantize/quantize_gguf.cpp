#include "quantize/quantize_gguf.h"

#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "quantize/hf_to_gguf.h"
#include "quantize/quantize_rows.h"

namespace brisk {

QuantizeReport quantize_gguf(const QuantizeParams& params) {
  if (std::filesystem::is_directory(params.in)) {
    // A Hugging Face folder: convert to a float32 GGUF beside the output, then quantize it.
    const std::string tmp = params.out + ".f32.tmp";
    hf_to_gguf_f32(params.in, tmp);
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
  const auto in = gguf::File::open(params.in, MappedFile::Mode::mmap);
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
  QuantizeReport report;
  std::vector<std::vector<uint8_t>> buffers;
  buffers.reserve(in.tensors().size());
  for (const auto& t : in.tensors()) {
    BRISK_CHECK(!t.ne.empty() && t.ne[0] > 0, params.in, ": tensor '", t.name, "' has an empty shape");
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
