// A small line editor for the interactive commands: on a terminal it reads one line in raw
// mode with cursor movement, editing keys and history (Up/Down, kept in a file); when input is
// not a terminal it reads plain lines and prints no prompt.
//
// Keys: Left/Right, Home/End (also Ctrl-A/Ctrl-E, Ctrl-B/Ctrl-F), Backspace, Delete, Ctrl-K
// (kill to end), Ctrl-U (kill to start), Ctrl-W (word back), Ctrl-L (clear screen), Up/Down
// (also Ctrl-P/Ctrl-N), Enter. Ctrl-C abandons the line; Ctrl-D on an empty line is end of
// input. The cursor counts one column per UTF-8 code point; a line wider than the terminal
// is redrawn on a single row.
#pragma once
#include <string>
#include <vector>

namespace brisk::cli {

class LineEditor {
 public:
  // `history_path`: "" keeps history in memory only.
  LineEditor(int in_fd, int out_fd, std::string history_path);
  ~LineEditor();
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  enum class Status { kLine, kEndOfInput, kInterrupted };
  struct Result {
    Status status = Status::kEndOfInput;
    std::string text;  // without the line end
  };
  Result read_line(const std::string& prompt);

  // Adds a non-empty line (not repeating the last one) and appends it to the history file.
  void add_history(const std::string& line);
  const std::vector<std::string>& history() const { return history_; }

  bool interactive() const { return interactive_; }

  // Default history file: $XDG_STATE_HOME/brisk/history, else ~/.local/state/brisk/history;
  // "" when neither is known.
  static std::string default_history_path();

 private:
  Result read_plain();
  Result read_raw(const std::string& prompt);
  int read_byte();  // -1 on end of input or error
  void refresh(const std::string& prompt, const std::string& buf, size_t cursor);
  void write_out(const std::string& s);

  int in_fd_, out_fd_;
  bool interactive_ = false;
  std::string history_path_;
  std::vector<std::string> history_;
  std::string pending_;  // plain mode: bytes read past the last line end
  bool eof_ = false;
};

}  // namespace brisk::cli
