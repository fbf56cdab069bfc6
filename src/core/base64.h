// Standard base64 (RFC 4648 alphabet), as tokenizer.json stores binary blobs such as the
// SentencePiece `precompiled_charsmap`.
#pragma once
#include <string>
#include <string_view>

namespace brisk {

// Decodes standard base64 (with or without padding); throws brisk::Error naming `where` on bad
// input.
std::string base64_decode(std::string_view in, const std::string& where);

}  // namespace brisk
