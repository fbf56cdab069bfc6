// Makes untrusted text (keys, tensor names, string values from a model file) safe to put in
// a one-line message or a terminal: control bytes and quotes are escaped, invalid UTF-8 bytes
// are shown as \xNN, and text beyond `max_bytes` is cut with a note of the full length.
#pragma once
#include <string>
#include <string_view>

namespace brisk {

std::string display_text(std::string_view s, size_t max_bytes = 120);

}  // namespace brisk
