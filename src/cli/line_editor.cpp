#include "cli/line_editor.h"

#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace brisk::cli {

namespace {

constexpr size_t kHistoryMax = 1000;
constexpr int kInterruptedRead = -2;

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

size_t count_code_points(const std::string& s, size_t from) {
  size_t n = 0;
  for (size_t i = from; i < s.size(); ++i)
    if (!is_continuation(s[i])) ++n;
  return n;
}

size_t prev_char(const std::string& s, size_t pos) {
  if (pos == 0) return 0;
  --pos;
  while (pos > 0 && is_continuation(s[pos])) --pos;
  return pos;
}

size_t next_char(const std::string& s, size_t pos) {
  if (pos >= s.size()) return s.size();
  ++pos;
  while (pos < s.size() && is_continuation(s[pos])) ++pos;
  return pos;
}

// Puts the terminal in raw mode for one line and restores it on scope exit, so that outside
// read_line() Ctrl-C raises SIGINT as usual.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    ok_ = tcsetattr(fd_, TCSADRAIN, &raw) == 0;
  }
  ~RawMode() {
    if (ok_) tcsetattr(fd_, TCSADRAIN, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_;
  termios saved_{};
  bool ok_ = false;
};

}  // namespace

LineEditor::LineEditor(int in_fd, int out_fd, std::string history_path)
    : in_fd_(in_fd), out_fd_(out_fd), history_path_(std::move(history_path)) {
  interactive_ = isatty(in_fd_) && isatty(out_fd_);
  if (history_path_.empty()) return;
  std::ifstream in(history_path_);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) history_.push_back(line);
  if (history_.size() > kHistoryMax)
    history_.erase(history_.begin(), history_.end() - std::ptrdiff_t(kHistoryMax));
}

LineEditor::~LineEditor() = default;

std::string LineEditor::default_history_path() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state && *state) return std::string(state) + "/brisk/history";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.local/state/brisk/history";
  return "";
}

void LineEditor::add_history(const std::string& line) {
  if (line.empty() || line.find('\n') != std::string::npos) return;
  if (!history_.empty() && history_.back() == line) return;
  history_.push_back(line);
  if (history_.size() > kHistoryMax) history_.erase(history_.begin());
  if (history_path_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(history_path_).parent_path(), ec);
  std::ofstream out(history_path_, std::ios::app);
  if (out) out << line << '\n';  // history is a convenience: a failed write is ignored
}

void LineEditor::write_out(const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(out_fd_, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

int LineEditor::read_byte() {
  unsigned char c = 0;
  for (;;) {
    const ssize_t n = ::read(in_fd_, &c, 1);
    if (n == 1) return c;
    if (n < 0 && errno == EINTR) return kInterruptedRead;
    return -1;
  }
}

LineEditor::Result LineEditor::read_line(const std::string& prompt) {
  if (!interactive_) return read_plain();
  return read_raw(prompt);
}

LineEditor::Result LineEditor::read_plain() {
  for (;;) {
    const size_t nl = pending_.find('\n');
    if (nl != std::string::npos) {
      Result r{Status::kLine, pending_.substr(0, nl)};
      pending_.erase(0, nl + 1);
      if (!r.text.empty() && r.text.back() == '\r') r.text.pop_back();
      return r;
    }
    if (eof_) {
      if (pending_.empty()) return {Status::kEndOfInput, ""};
      Result r{Status::kLine, std::move(pending_)};
      pending_.clear();
      return r;
    }
    char buf[4096];
    const ssize_t n = ::read(in_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return {Status::kInterrupted, ""};
    if (n <= 0) eof_ = true;
    else pending_.append(buf, size_t(n));
  }
}

void LineEditor::refresh(const std::string& prompt, const std::string& buf, size_t cursor) {
  std::string s = "\r" + prompt + buf + "\x1b[K";
  const size_t back = count_code_points(buf, cursor);
  if (back > 0) s += "\x1b[" + std::to_string(back) + "D";
  write_out(s);
}

LineEditor::Result LineEditor::read_raw(const std::string& prompt) {
  RawMode raw(in_fd_);
  if (!raw.ok()) return read_plain();
  std::string buf;
  size_t cursor = 0;
  size_t hist_pos = history_.size();  // == size: the line being edited
  std::string edited;                 // the line being edited while browsing history
  refresh(prompt, buf, cursor);

  auto show_history = [&](size_t pos) {
    if (hist_pos == history_.size()) edited = buf;
    hist_pos = pos;
    buf = hist_pos == history_.size() ? edited : history_[hist_pos];
    cursor = buf.size();
  };

  for (;;) {
    int c = read_byte();
    if (c == kInterruptedRead) continue;  // a signal such as SIGWINCH; keep editing
    if (c < 0) {
      write_out("\r\n");
      return {buf.empty() ? Status::kEndOfInput : Status::kLine, buf};
    }
    switch (c) {
      case '\r':
      case '\n':
        write_out("\r\n");
        return {Status::kLine, buf};
      case 3:  // Ctrl-C
        write_out("^C\r\n");
        return {Status::kInterrupted, ""};
      case 4:  // Ctrl-D
        if (buf.empty()) {
          write_out("\r\n");
          return {Status::kEndOfInput, ""};
        }
        if (cursor < buf.size()) buf.erase(cursor, next_char(buf, cursor) - cursor);
        break;
      case 127:
      case 8:
        if (cursor > 0) {
          const size_t p = prev_char(buf, cursor);
          buf.erase(p, cursor - p);
          cursor = p;
        }
        break;
      case 1: cursor = 0; break;
      case 5: cursor = buf.size(); break;
      case 2: cursor = prev_char(buf, cursor); break;
      case 6: cursor = next_char(buf, cursor); break;
      case 11: buf.erase(cursor); break;
      case 21:
        buf.erase(0, cursor);
        cursor = 0;
        break;
      case 23: {
        size_t p = cursor;
        while (p > 0 && buf[p - 1] == ' ') --p;
        while (p > 0 && buf[p - 1] != ' ') --p;
        buf.erase(p, cursor - p);
        cursor = p;
        break;
      }
      case 12: write_out("\x1b[H\x1b[2J"); break;
      case 16:
        if (hist_pos > 0) show_history(hist_pos - 1);
        break;
      case 14:
        if (hist_pos < history_.size()) show_history(hist_pos + 1);
        break;
      case 27: {  // escape sequences: ESC [ X, ESC [ N ~, ESC O X
        const int a = read_byte();
        if (a != '[' && a != 'O') break;
        int b = read_byte();
        if (b >= '0' && b <= '9') {
          const int digit = b;
          do b = read_byte();
          while (b >= '0' && b <= '9');  // ignore multi-digit codes and modifiers (";5")
          if (b == ';') {
            while (b >= 0 && !((b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '~')) b = read_byte();
          }
          if (b != '~') break;
          if (digit == '3' && cursor < buf.size()) buf.erase(cursor, next_char(buf, cursor) - cursor);
          else if (digit == '1' || digit == '7') cursor = 0;
          else if (digit == '4' || digit == '8') cursor = buf.size();
          break;
        }
        if (b == 'A' && hist_pos > 0) show_history(hist_pos - 1);
        else if (b == 'B' && hist_pos < history_.size()) show_history(hist_pos + 1);
        else if (b == 'C') cursor = next_char(buf, cursor);
        else if (b == 'D') cursor = prev_char(buf, cursor);
        else if (b == 'H') cursor = 0;
        else if (b == 'F') cursor = buf.size();
        break;
      }
      default:
        if (c == '\t' || c >= 32) {  // a tab is inserted as a space
          if (c == '\t') c = ' ';
          buf.insert(cursor, 1, char(c));
          ++cursor;
        }
        break;
    }
    refresh(prompt, buf, cursor);
  }
}

}  // namespace brisk::cli
