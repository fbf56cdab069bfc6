// `brisk tokenize MODEL [--file F | TEXT] [--add-special] [--parse-special] [--show-pieces]`:
// prints the ids of the text, space-separated, on one line. M is a GGUF file or a folder with
// tokenizer.json. --show-pieces prints one "id<TAB>vocab entry<TAB>its text" line per token
// instead (control characters escaped).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "core/error.h"
#include "text/tokenizer_load.h"
#include "text/unicode.h"

namespace {

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
  bool show_pieces = false, have_text = false;
  brisk::EncodeOptions opt;
  brisk::cli::ArgParser p("tokenize", "MODEL (TEXT | --file F) [options]",
                          "Prints the token ids of a text, space-separated, on one line.");
  p.model(&model, "a GGUF file or a folder with tokenizer.json, or a Hub reference");
  p.positional("TEXT", &text, "the text (after `--` when it starts with '-')", /*required=*/false);
  p.text({"--file"}, &file, "F", "read the text from a file");
  p.flag({"--add-special"}, &opt.add_special, "add the model's BOS/EOS and post-processor tokens");
  p.flag({"--parse-special"}, &opt.parse_special, "match special tokens written in the text");
  p.flag({"--show-pieces"}, &show_pieces, "one line per token: id, vocabulary entry, text");
  if (!p.parse(args)) return 0;
  have_text = p.given("TEXT");
  if (file.empty() != have_text) brisk::cli::usage_fail("give exactly one of TEXT and --file");
  if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    BRISK_CHECK(in, "cannot open ", file);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  const auto tok = brisk::load_tokenizer(brisk::cli::resolve_model(model));
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

BRISK_COMMAND("tokenize", "print the token ids of a text (MODEL: a GGUF file or a tokenizer folder)", cmd_tokenize);
