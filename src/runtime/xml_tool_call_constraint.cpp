// Forced XML tool call recognizer (see xml_tool_call_constraint.h).
#include "runtime/xml_tool_call_constraint.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "runtime/constraint_steps.h"

namespace brisk {
namespace {

constexpr const char* kOpen = "<tool_call>\n<function=";
constexpr const char* kNewline = "\n";
constexpr const char* kParamOpen = "<parameter=";
constexpr const char* kValueEnd = "\n</parameter>\n";
constexpr const char* kClose = "</function>\n</tool_call>";
constexpr std::string_view kTextEnd = "\n</parameter>";
// Inside raw text these would end the value (or the call) early for the parser.
constexpr std::string_view kForbidden[] = {"</parameter>", "<parameter=", "</function>", "</tool_call>"};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

XmlToolCallConstraint::XmlToolCallConstraint(std::vector<ToolFunctionSpec> functions, std::string free_text_until,
                                             int32_t max_whitespace_run) {
  BRISK_CHECK(!functions.empty(), "xml tool call constraint: no functions given");
  for (const auto& f : functions) {
    BRISK_CHECK(!f.name.empty() && f.name.find_first_of(">\n") == std::string::npos,
                "xml tool call constraint: bad function name '", f.name, "'");
    BRISK_CHECK(f.params.size() <= 64, "xml tool call constraint: more than 64 parameters");
  }
  BRISK_CHECK(max_whitespace_run >= 0, "xml tool call constraint: max_whitespace_run must be >= 0");
  owner_ = std::make_shared<const Shared>(Shared{std::move(functions), std::move(free_text_until), max_whitespace_run});
  shared_ = owner_.get();
  if (!shared_->free_text_until.empty()) phase_ = Phase::kFreeText;
}

XmlToolCallConstraint XmlToolCallConstraint::borrowed_copy() const {
  XmlToolCallConstraint c;
  c.shared_ = shared_;
  c.phase_ = phase_;
  c.literal_ = literal_;
  c.then_ = then_;
  c.pos_ = pos_;
  c.fn_ = fn_;
  c.param_ = param_;
  c.seen_ = seen_;
  c.lo_ = lo_;
  c.hi_ = hi_;
  c.buf_ = buf_;
  if (phase_ == Phase::kJson) c.json_ = json_.borrowed_copy();
  return c;
}

bool XmlToolCallConstraint::accepts(std::string_view piece) const { return steps_accept(*this, piece); }

void XmlToolCallConstraint::advance(std::string_view piece) {
  XmlToolCallConstraint next = steps_advance(*this, piece, "xml tool call constraint");
  std::shared_ptr<const Shared> keep = std::move(owner_);
  *this = std::move(next);
  owner_ = std::move(keep);
}

void XmlToolCallConstraint::expect(const char* literal, uint32_t pos, Phase then) {
  if (literal[pos] == '\0') {
    phase_ = then;
    pos_ = 0;
    buf_.clear();
    return;
  }
  phase_ = Phase::kLiteral;
  literal_ = literal;
  pos_ = pos;
  then_ = then;
}

// After "<parameter=NAME>\n": the value's reader.
bool XmlToolCallConstraint::start_value() {
  buf_.clear();
  pos_ = 0;
  if (param_ < 0) {
    phase_ = Phase::kText;
    return true;
  }
  const ToolParamSpec& p = shared_->functions[size_t(fn_)].params[size_t(param_)];
  switch (p.kind) {
    case ToolParamSpec::Kind::kText:
      phase_ = Phase::kText;
      break;
    case ToolParamSpec::Kind::kChoice:
      phase_ = Phase::kChoice;
      lo_ = 0;
      hi_ = uint32_t(p.choices.size());
      break;
    case ToolParamSpec::Kind::kJson:
      phase_ = Phase::kJson;
      json_ = SchemaConstraint::unowned(p.json.get(), shared_->max_whitespace_run);
      break;
  }
  return true;
}

bool XmlToolCallConstraint::step(uint8_t b) {
  switch (phase_) {
    case Phase::kFreeText:
      if (marker_reached(buf_, shared_->free_text_until, b)) {
        phase_ = Phase::kOpen;
        pos_ = 0;
      }
      return true;
    case Phase::kOpen:
      // Whitespace may separate the reasoning close from the call.
      if (pos_ == 0 && !shared_->free_text_until.empty() && is_json_ws(b)) return true;
      if (b != uint8_t(kOpen[0])) return false;
      expect(kOpen, 1, Phase::kName);
      return true;
    case Phase::kLiteral:
      if (b != uint8_t(literal_[pos_])) return false;
      expect(literal_, pos_ + 1, then_);
      return true;
    case Phase::kName: {
      const auto& fns = shared_->functions;
      if (b == '>') {
        for (size_t i = 0; i < fns.size(); ++i) {
          if (fns[i].name != buf_) continue;
          fn_ = int32_t(i);
          seen_ = 0;
          expect(kNewline, 0, Phase::kTag);
          return true;
        }
        return false;
      }
      buf_.push_back(char(b));
      return std::any_of(fns.begin(), fns.end(),
                         [&](const ToolFunctionSpec& f) { return f.name.compare(0, buf_.size(), buf_) == 0 && f.name.size() >= buf_.size(); });
    }
    case Phase::kTag: {
      // "<parameter=" while a parameter can still be written, "</function>..." once every
      // required one has been.
      const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
      const bool more = f.open_params || uint32_t(__builtin_popcountll(seen_)) < f.params.size();
      const bool can_close = (f.required & ~seen_) == 0;
      if (pos_ == 0) {
        if (b != '<' || (!more && !can_close)) return false;
        pos_ = 1;
        return true;
      }
      if (b == 'p' && more) {
        expect(kParamOpen, 2, Phase::kParamName);
        return true;
      }
      if (b == '/' && can_close) {
        expect(kClose, 2, Phase::kDone);
        return true;
      }
      return false;
    }
    case Phase::kParamName: {
      const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
      if (b == '>') {
        if (buf_.empty() || uint8_t(buf_.back()) < 0x21) return false;
        param_ = -1;
        for (size_t i = 0; i < f.params.size(); ++i) {
          if (f.params[i].name != buf_) continue;
          if ((seen_ >> i) & 1) return false;
          param_ = int32_t(i);
          seen_ |= uint64_t{1} << i;
        }
        if (param_ < 0 && !f.open_params) return false;
        buf_.clear();
        phase_ = Phase::kParamNewline;
        return true;
      }
      if (b == '\n' || b == '<') return false;
      buf_.push_back(char(b));
      for (size_t i = 0; i < f.params.size(); ++i) {
        const std::string& n = f.params[i].name;
        if (!((seen_ >> i) & 1) && n.size() >= buf_.size() && n.compare(0, buf_.size(), buf_) == 0) return true;
      }
      // An open name: no whitespace or control bytes, which the parser would trim away.
      return f.open_params && b >= 0x21;
    }
    case Phase::kParamNewline:
      return b == '\n' && start_value();
    case Phase::kText:
      buf_.push_back(char(b));
      if (buf_.size() > 16) buf_.erase(0, buf_.size() - 16);
      if (ends_with(buf_, kTextEnd)) {
        expect(kNewline, 0, Phase::kTag);
        return true;
      }
      for (std::string_view bad : kForbidden)
        if (ends_with(buf_, bad)) return false;
      return true;
    case Phase::kChoice: {
      const auto& choices = shared_->functions[size_t(fn_)].params[size_t(param_)].choices;
      if (b == '\n' && choices[lo_].size() == pos_) {  // a whole choice (it sorts first)
        expect(kValueEnd, 1, Phase::kTag);
        return true;
      }
      const auto [lo, hi] = narrow_candidates(choices, lo_, hi_, pos_, b);
      if (lo == hi) return false;
      lo_ = lo;
      hi_ = hi;
      ++pos_;
      return true;
    }
    case Phase::kJson:
      if (b == '\n' && json_.complete()) {
        expect(kValueEnd, 1, Phase::kTag);
        return true;
      }
      return json_.step(b);
    case Phase::kDone:
      return false;
  }
  return false;
}

}  // namespace brisk
