// `brisk tokenize --model M [--file F | TEXT] [--add-special] [--parse-special] [--show-pieces]`:
// prints the ids of the text, space-separated, on one line. M is a GGUF file or a folder with
// tokenizer.json. --show-pieces prints one "id<TAB>vocab entry<TAB>its text" line per token
// instead (control characters escaped).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "core/error.h"
#include "text/tokenizer_load.h"
#include "text/unicode.h"

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: brisk tokenize --model M [--file F | TEXT] [--add-special] [--parse-special] "
               "[--show-pieces]\n");
  return 2;
}

// Escapes control bytes (and bytes that are not valid UTF-8) so a piece stays on one line.
std::string printable(const std::string& s) {
  if (!brisk::text::utf8_is_valid(s)) {
    std::string out;
    for (unsigned char c : s) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), c < 0x80 && c >= 0x20 ? "%c" : "\\x%02x", c);
      out += buf;
    }
    return out;
  }
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

int cmd_tokenize(const std::vector<std::string>& args) {
  std::string model, file, text;
  bool have_text = false, show_pieces = false;
  brisk::EncodeOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--model" && i + 1 < args.size()) model = args[++i];
    else if (a == "--file" && i + 1 < args.size()) file = args[++i];
    else if (a == "--add-special") opt.add_special = true;
    else if (a == "--parse-special") opt.parse_special = true;
    else if (a == "--show-pieces") show_pieces = true;
    else if (a == "-h" || a == "--help") return usage();
    else if (a == "--") {
      if (i + 1 < args.size()) { text = args[++i]; have_text = true; }
    } else if (!a.empty() && a[0] == '-' && a.size() > 1) {
      std::fprintf(stderr, "tokenize: unknown option %s\n", a.c_str());
      return usage();
    } else if (!have_text) {
      text = a;
      have_text = true;
    } else {
      return usage();
    }
  }
  if (model.empty() || (file.empty() == !have_text)) return usage();
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    BRISK_CHECK(in, "tokenize: cannot open ", file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto tok = brisk::load_tokenizer(model);
  const auto ids = tok->encode(text, opt);
  if (show_pieces) {
    for (int32_t id : ids)
      std::printf("%d\t%s\t%s\n", id, printable(tok->token_text(id)).c_str(),
                  printable(tok->decode_bytes({id})).c_str());
    return 0;
  }
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}

}  // namespace

BRISK_COMMAND("tokenize", "print the token ids of a text (--model GGUF or tokenizer folder)", cmd_tokenize);
