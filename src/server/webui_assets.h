// The chat page's files (webui/ in the source tree), embedded in the binary at build time by
// cmake/embed_files.cmake: nothing is read from disk or the network when the page is served.
#pragma once
#include <span>
#include <string_view>

namespace brisk::server {

struct WebAsset {
  std::string_view path;          // relative to webui/, e.g. "index.html"
  std::string_view content_type;
  std::string_view bytes;
  std::string_view etag;          // quoted, from the file's sha256
};

std::span<const WebAsset> webui_assets();

}  // namespace brisk::server
