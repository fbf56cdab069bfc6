// JSON file reading with errors that name the file.
#include "formats/json_file.h"

#include "core/error.h"
#include "formats/mapped_file.h"

namespace brisk {

nlohmann::json parse_json_text(std::string_view text, const std::string& name) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    fail(name, ": invalid JSON at byte ", e.byte, ": ", e.what());
  } catch (const nlohmann::json::exception& e) {
    fail(name, ": invalid JSON: ", e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  const auto bytes = MappedFile::open(path, MappedFile::Mode::read);
  return parse_json_text(
      std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()), path);
}

}  // namespace brisk
