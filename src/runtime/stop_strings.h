// Stop strings over streamed text: emits text as soon as it can no longer be the start of a
// stop string, holds back the rest, and cuts the text at the first complete stop string.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace brisk {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);
  // Appends `text`; returns what is safe to emit now. After a match, returns the text before
  // the stop string and matched() is true (later input is ignored).
  std::string push(std::string_view text);
  // End of generation: whatever was held back (nothing after a match).
  std::string flush();
  bool matched() const { return matched_; }
  const std::string& matched_stop() const { return matched_stop_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool matched_ = false;
  std::string matched_stop_;
};

}  // namespace brisk
