// `brisk inspect MODEL [--json] [--devices] [--flags]`: what is in a model file.
// GGUF files and safetensors checkpoints (file, folder, sharded index; told apart by content):
// format, architecture, metadata (long arrays summarized), the tensor table and totals
// (parameters, bytes, bits per weight). --devices lists accelerators, --flags the run-time
// switches. Malformed input is a one-line error and a non-zero exit (main.cpp prints
// brisk::Error); so is a model whose architecture brisk does not know, after its listing.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "backend/devices.h"
#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "core/flags.h"
#include "formats/display.h"
#include "formats/gguf.h"
#include "formats/json_file.h"
#include "formats/model_format.h"
#include "formats/safetensors.h"
#include "models/registry.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace brisk;

constexpr size_t kArrayShown = 8;  // arrays longer than this are summarized

struct Options {
  std::string path;
  bool json = false;
  bool devices = false;
  bool flags = false;
};

// One row of the tensor table, whatever the format.
struct TensorRow {
  std::string name;
  std::string type;
  std::vector<uint64_t> shape;
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
};

// Everything inspect prints, filled by the format-specific readers below.
struct Report {
  std::string path;
  std::string format;       // "GGUF v3", "safetensors"
  std::string format_note;  // alignment / shard count
  std::string architecture;
  std::string model_type;   // config.json "model_type" (safetensors)
  bool supported = false;   // brisk has this architecture
  std::string shape_order;  // how shapes are listed
  std::vector<std::pair<std::string, std::string>> metadata_text;
  json metadata_json = json::object();
  std::vector<TensorRow> tensors;
};

std::string number_text(double d, int digits) {
  std::ostringstream os;
  os.precision(digits);
  os << d;
  return os.str();
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// ---- GGUF -------------------------------------------------------------------------------

std::string gguf_value_text(const gguf::Value& v) {
  if (const std::string* s = v.as_string()) return "\"" + display_text(*s) + "\"";
  if (const auto b = v.as_bool()) return *b ? "true" : "false";
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return std::to_string(*u);
  if (const auto* i = std::get_if<int64_t>(&v.data)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v.data))
    return number_text(*d, v.type == gguf::ValueType::FLOAT32 ? 7 : 16);
  const gguf::Array& a = *v.as_array();
  std::string s;
  const size_t shown = a.items.size() > kArrayShown ? 5 : a.items.size();
  if (a.items.size() > kArrayShown)
    s = str_cat("[", gguf::value_type_name(a.type), " × ", a.items.size(), "] ");
  s += "[";
  for (size_t i = 0; i < shown; ++i) {
    if (i) s += ", ";
    s += gguf_value_text(a.items[i]);
  }
  return s + (shown < a.items.size() ? ", ...]" : "]");
}

json gguf_value_json(const gguf::Value& v) {
  if (const std::string* s = v.as_string()) return *s;
  if (const auto b = v.as_bool()) return *b;
  if (const auto* u = std::get_if<uint64_t>(&v.data)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v.data)) return *i;
  if (const auto* d = std::get_if<double>(&v.data)) return *d;
  const gguf::Array& a = *v.as_array();
  json items = json::array();
  for (size_t i = 0; i < std::min(a.items.size(), kArrayShown); ++i)
    items.push_back(gguf_value_json(a.items[i]));
  if (a.items.size() <= kArrayShown) return items;
  return json{{"type", gguf::value_type_name(a.type)}, {"count", a.items.size()}, {"first", items}};
}

Report inspect_gguf(const std::string& path) {
  const auto f = gguf::File::open(path);
  Report r;
  r.path = path;
  r.format = str_cat("GGUF v", f.version());
  r.format_note = str_cat("alignment ", f.alignment(), ", data section at byte ", f.data_offset());
  r.architecture = f.architecture();
  r.supported = arch_find_gguf(r.architecture) != nullptr;
  r.shape_order = "ne[0] first (innermost)";
  for (const auto& [key, value] : f.metadata()) {
    r.metadata_text.emplace_back(display_text(key, 80), gguf_value_text(value));
    r.metadata_json[key] = gguf_value_json(value);
  }
  for (const auto& t : f.tensors())
    r.tensors.push_back(TensorRow{.name = t.name,
                                  .type = std::string(quant_type_info(t.type).name),
                                  .shape = t.ne,
                                  .n_elements = t.n_elements,
                                  .n_bytes = t.n_bytes});
  return r;
}

// ---- safetensors ------------------------------------------------------------------------

Report inspect_safetensors(const std::string& path) {
  const auto c = safetensors::Checkpoint::open(path);
  std::vector<std::string> files;
  for (const auto& t : c.tensors())
    if (std::find(files.begin(), files.end(), t.file) == files.end()) files.push_back(t.file);
  Report r;
  r.path = path;
  r.format = "safetensors";
  r.format_note = str_cat(files.size(), files.size() == 1 ? " file" : " files");
  r.shape_order = "outermost first (row-major)";
  // The architecture comes from config.json next to the weights.
  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  const fs::path config = (dir.empty() ? fs::path(".") : dir) / "config.json";
  if (fs::exists(config)) {
    const json j = read_json_file(config.string());
    if (j.is_object()) {
      const auto a = j.find("architectures");
      if (a != j.end() && a->is_array() && !a->empty() && a->front().is_string())
        r.architecture = a->front().get<std::string>();
      const auto m = j.find("model_type");
      if (m != j.end() && m->is_string()) {
        r.model_type = m->get<std::string>();
        r.metadata_text.emplace_back("config.model_type", "\"" + display_text(m->get<std::string>()) + "\"");
        r.metadata_json["config.model_type"] = *m;
      }
    }
  }
  r.supported = arch_find_hf({r.architecture}, r.model_type) != nullptr;
  for (const auto& [k, v] : c.metadata()) {
    r.metadata_text.emplace_back(display_text(k, 80), "\"" + display_text(v) + "\"");
    r.metadata_json[k] = v;
  }
  for (const auto& t : c.tensors())
    r.tensors.push_back(TensorRow{.name = t.name,
                                  .type = std::string(safetensors::dtype_name(t.dtype)),
                                  .shape = t.shape,
                                  .n_elements = t.n_elements,
                                  .n_bytes = t.n_bytes});
  return r;
}

// ---- output -----------------------------------------------------------------------------

struct Totals {
  uint64_t parameters = 0, bytes = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (tensors, bytes)
  double bits_per_weight() const { return parameters ? 8.0 * double(bytes) / double(parameters) : 0; }
};

Totals totals_of(const Report& r) {
  Totals t;
  for (const auto& row : r.tensors) {
    t.parameters += row.n_elements;
    t.bytes += row.n_bytes;
    auto& bt = t.by_type[row.type];
    bt.first += 1;
    bt.second += row.n_bytes;
  }
  return t;
}

void print_text(const Report& r) {
  std::printf("file:         %s\n", display_text(r.path, 400).c_str());
  std::printf("format:       %s (%s)\n", r.format.c_str(), r.format_note.c_str());
  std::printf("architecture: %s%s\n", r.architecture.empty() ? "(unknown)" : display_text(r.architecture).c_str(),
              r.supported || r.architecture.empty() ? "" : " (not supported by brisk)");
  std::printf("\nmetadata (%zu):\n", r.metadata_text.size());
  size_t key_width = 0;
  for (const auto& kv : r.metadata_text) key_width = std::max(key_width, kv.first.size());
  for (const auto& [k, v] : r.metadata_text)
    std::printf("  %-*s = %s\n", int(key_width), k.c_str(), v.c_str());

  std::printf("\ntensors (%zu; shape %s):\n", r.tensors.size(), r.shape_order.c_str());
  size_t name_width = 4;
  std::vector<std::string> names;
  for (const auto& t : r.tensors) {
    names.push_back(display_text(t.name, 60));
    name_width = std::max(name_width, names.back().size());
  }
  if (!r.tensors.empty())
    std::printf("  %-*s  %-8s  %-24s  %14s\n", int(name_width), "name", "type", "shape", "bytes");
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    const auto& t = r.tensors[i];
    std::printf("  %-*s  %-8s  %-24s  %14llu\n", int(name_width), names[i].c_str(), t.type.c_str(),
                shape_text(t.shape).c_str(), static_cast<unsigned long long>(t.n_bytes));
  }
  const Totals tot = totals_of(r);
  std::printf("\ntotals: %zu tensors, %llu parameters, %llu bytes (%.2f MiB), %.3f bits per weight\n",
              r.tensors.size(), static_cast<unsigned long long>(tot.parameters),
              static_cast<unsigned long long>(tot.bytes), double(tot.bytes) / (1024.0 * 1024.0),
              tot.bits_per_weight());
  for (const auto& [type, nb] : tot.by_type)
    std::printf("  %-8s %6llu tensors %14llu bytes\n", type.c_str(),
                static_cast<unsigned long long>(nb.first), static_cast<unsigned long long>(nb.second));
}

json report_json(const Report& r) {
  const Totals tot = totals_of(r);
  json tensors = json::array();
  for (const auto& t : r.tensors)
    tensors.push_back({{"name", t.name}, {"type", t.type}, {"shape", t.shape},
                       {"elements", t.n_elements}, {"bytes", t.n_bytes}});
  json by_type = json::object();
  for (const auto& [type, nb] : tot.by_type) by_type[type] = {{"tensors", nb.first}, {"bytes", nb.second}};
  return {{"file", r.path},
          {"format", r.format},
          {"format_note", r.format_note},
          {"architecture", r.architecture},
          {"supported", r.supported},
          {"shape_order", r.shape_order},
          {"metadata", r.metadata_json},
          {"tensors", tensors},
          {"totals", {{"tensors", r.tensors.size()}, {"parameters", tot.parameters},
                      {"bytes", tot.bytes}, {"bits_per_weight", tot.bits_per_weight()},
                      {"by_type", by_type}}}};
}

json devices_json() {
  json out = json::array();
  for (const auto& d : list_devices())
    out.push_back({{"backend", d.backend}, {"index", d.index}, {"name", d.name},
                   {"compute", str_cat(d.compute_major, ".", d.compute_minor)},
                   {"total_memory", d.total_memory}, {"free_memory", d.free_memory}});
  return out;
}

void print_devices() {
  const auto devices = list_devices();
  std::printf("devices:\n");
  if (devices.empty()) std::printf("  none (%s)\n", devices_unavailable_reason().c_str());
  for (const auto& d : devices)
    std::printf("  %s:%d  %s  sm_%d%d  %.1f GiB total, %.1f GiB free\n", d.backend.c_str(), d.index,
                d.name.c_str(), d.compute_major, d.compute_minor,
                double(d.total_memory) / (1 << 30), double(d.free_memory) / (1 << 30));
}

void print_flags() {
  std::printf("switches (environment):\n");
  for (const auto& f : flags_list())
    std::printf("  %-24s %-3s %s\n", std::string(f.env_name).c_str(), f.value ? "on" : "off",
                std::string(f.description).c_str());
}

// Why brisk cannot run the model of `r` ("" when it can, or when `r` is a vocabulary-only
// file without tensors, as llama.cpp's ggml-vocab-*.gguf).
std::string unsupported_reason(const Report& r) {
  if (r.supported || r.tensors.empty()) return "";
  if (r.architecture.empty())
    return r.format == "safetensors" ? str_cat(r.path, ": the architecture is unknown (no config.json with "
                                                       "\"architectures\" beside the weights)")
                                     : str_cat(r.path, ": no general.architecture in the GGUF metadata");
  std::string known;
  for (const ArchEntry* e : arch_registry()) known += (known.empty() ? "" : ", ") + e->name;
  return str_cat(r.path, ": architecture '", display_text(r.architecture), "' is not supported by brisk (supported: ",
                 known, ")");
}

int cmd_inspect(const std::vector<std::string>& args) {
  Options o;
  cli::ArgParser p("inspect", "MODEL [--json] [--devices] [--flags]",
                   "Shows what is in a model file: format, architecture, metadata, tensors and totals.");
  p.model(&o.path, "a GGUF file, a safetensors file, a checkpoint folder or its index.json, or a Hub reference",
          /*required=*/false);
  p.flag({"--json"}, &o.json, "machine-readable output");
  p.flag({"--devices"}, &o.devices, "also list accelerators (alone: only them)");
  p.flag({"--flags"}, &o.flags, "also list the run-time switches (alone: only them)");
  p.note("Exit status 1 when brisk cannot run the model (unknown or unsupported architecture), after the listing.");
  if (!p.parse(args)) return 0;
  if (o.path.empty() && !o.devices && !o.flags) cli::usage_fail("a model is required (or --devices, --flags)");
  std::optional<Report> report;
  if (!o.path.empty()) {
    const std::string path = cli::resolve_model(o.path);
    report = model_format_detect(path) == ModelFormat::gguf ? inspect_gguf(path) : inspect_safetensors(path);
  }
  if (o.json) {
    json out = report ? report_json(*report) : json::object();
    if (o.devices) {
      out["devices"] = devices_json();
      if (out["devices"].empty()) out["devices_unavailable"] = devices_unavailable_reason();
    }
    if (o.flags) {
      json flags = json::array();
      for (const auto& f : flags_list())
        flags.push_back({{"env", f.env_name}, {"on", f.value}, {"description", f.description}});
      out["flags"] = flags;
    }
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    std::fflush(stdout);
    if (const std::string why = report ? unsupported_reason(*report) : ""; !why.empty()) fail(why);
    return 0;
  }
  if (report) print_text(*report);
  if (o.devices) {
    if (report) std::printf("\n");
    print_devices();
  }
  if (o.flags) {
    if (report || o.devices) std::printf("\n");
    print_flags();
  }
  std::fflush(stdout);
  if (const std::string why = report ? unsupported_reason(*report) : ""; !why.empty()) fail(why);
  return 0;
}

}  // namespace

BRISK_COMMAND("inspect", "show a model file's format, metadata, tensors and totals", cmd_inspect);
