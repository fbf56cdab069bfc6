// Forced Gemma 4 tool call recognizer (see gemma4_tool_call_constraint.h).
#include "runtime/gemma4_tool_call_constraint.h"

#include <algorithm>

#include "core/error.h"
#include "runtime/constraint_steps.h"

namespace brisk {
namespace {

constexpr std::string_view kOpen = "<|tool_call>call:";
constexpr std::string_view kClose = "<tool_call|>";
constexpr std::string_view kQuote = "<|\"|>";

// Bytes a bare key may hold (the parser reads a key up to ':' and trims it).
bool key_byte(uint8_t b) {
  return b >= 0x20 && b != ':' && b != '{' && b != '}' && b != '[' && b != ']' && b != ',' && b != '<';
}
bool writable_key(const std::string& k) {
  return !k.empty() && std::all_of(k.begin(), k.end(), [](char c) { return key_byte(uint8_t(c)); }) &&
         !is_json_ws(uint8_t(k.front())) && !is_json_ws(uint8_t(k.back()));
}

}  // namespace

Gemma4ToolCallConstraint::Gemma4ToolCallConstraint(std::vector<ToolFunctionSpec> functions, std::string free_text_until) {
  BRISK_CHECK(!functions.empty(), "gemma4 tool call constraint: no functions given");
  for (auto& f : functions) {
    BRISK_CHECK(!f.name.empty() && f.name.find('{') == std::string::npos && f.name.find('<') == std::string::npos,
                "gemma4 tool call constraint: bad function name '", f.name, "'");
    BRISK_CHECK(f.params.size() <= 64, "gemma4 tool call constraint: more than 64 parameters");
    // A parameter whose name cannot be written bare is left out (and so not required).
    uint64_t required = 0;
    std::vector<ToolParamSpec> kept;
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (!writable_key(f.params[i].name)) continue;
      if ((f.required >> i) & 1) required |= uint64_t{1} << kept.size();
      kept.push_back(std::move(f.params[i]));
    }
    f.params = std::move(kept);
    f.required = required;
  }
  owner_ = std::make_shared<const Shared>(Shared{std::move(functions), std::move(free_text_until)});
  shared_ = owner_.get();
  if (!shared_->free_text_until.empty()) phase_ = Phase::kFreeText;
}

Gemma4ToolCallConstraint Gemma4ToolCallConstraint::borrowed_copy() const {
  Gemma4ToolCallConstraint c;
  c.shared_ = shared_;
  c.phase_ = phase_;
  c.pos_ = pos_;
  c.fn_ = fn_;
  c.param_ = param_;
  c.seen_ = seen_;
  c.leaf_ = leaf_;
  c.integer_ = integer_;
  c.lo_ = lo_;
  c.hi_ = hi_;
  c.buf_ = buf_;
  c.scalar_ = scalar_;
  c.depth_ = depth_;
  std::copy_n(levels_.begin(), depth_, c.levels_.begin());
  return c;
}

bool Gemma4ToolCallConstraint::accepts(std::string_view piece) const { return steps_accept(*this, piece); }

void Gemma4ToolCallConstraint::advance(std::string_view piece) {
  Gemma4ToolCallConstraint next = steps_advance(*this, piece, "gemma4 tool call constraint");
  std::shared_ptr<const Shared> keep = std::move(owner_);
  *this = std::move(next);
  owner_ = std::move(keep);
}

const ToolParamSpec* Gemma4ToolCallConstraint::top_param() const {
  if (depth_ != 1 || fn_ < 0 || param_ < 0) return nullptr;
  return &shared_->functions[size_t(fn_)].params[size_t(param_)];
}

bool Gemma4ToolCallConstraint::end_value() {
  leaf_ = Leaf::kNone;
  levels_[size_t(depth_ - 1)].slot = Slot::kAfterValue;
  if (depth_ == 1) param_ = -1;
  return true;
}

bool Gemma4ToolCallConstraint::end_key() {
  Level& level = levels_[size_t(depth_ - 1)];
  if (buf_.empty() || is_json_ws(uint8_t(buf_.back()))) return false;
  if (depth_ == 1) {
    const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
    param_ = -1;
    for (size_t i = 0; i < f.params.size(); ++i) {
      if (f.params[i].name != buf_) continue;
      if ((seen_ >> i) & 1) return false;
      param_ = int32_t(i);
      seen_ |= uint64_t{1} << i;
    }
    if (param_ < 0 && !f.open_params) return false;
  }
  buf_.clear();
  leaf_ = Leaf::kNone;
  level.slot = Slot::kNeedValue;
  return true;
}

bool Gemma4ToolCallConstraint::begin_value(uint8_t b) {
  const ToolParamSpec* p = top_param();
  if (p && (p->kind == ToolParamSpec::Kind::kText || p->kind == ToolParamSpec::Kind::kChoice) && b != '<') return false;
  if (p && p->kind == ToolParamSpec::Kind::kJson && (b == '<' || !json_schema_admits_first_byte(*p->json, b)))
    return false;
  if (b == '<') {
    leaf_ = Leaf::kQuoteOpen;
    pos_ = 1;
    return true;
  }
  if (b == '{' || b == '[') {
    if (depth_ >= kMaxDepth) return false;
    levels_[size_t(depth_++)] = Level{.array = b == '[', .slot = Slot::kFirst};
    leaf_ = Leaf::kNone;
    return true;
  }
  if (b == '-' || is_ascii_digit(b) || b == 't' || b == 'f' || b == 'n') {
    scalar_ = JsonConstraint({.require_object = false, .max_depth = 1, .max_whitespace_run = 0, .finite_numbers = true});
    integer_ = p && p->kind == ToolParamSpec::Kind::kJson && json_schema_integer_only(*p->json);
    leaf_ = Leaf::kScalar;
    return scalar_.step(b);
  }
  return false;
}

bool Gemma4ToolCallConstraint::step_args(uint8_t b) {
  switch (leaf_) {
    case Leaf::kKey: {
      if (b == ':') return end_key();
      if (!key_byte(b)) return false;
      buf_.push_back(char(b));
      if (depth_ != 1) return true;
      const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
      if (f.open_params) return true;
      for (size_t i = 0; i < f.params.size(); ++i) {
        const std::string& n = f.params[i].name;
        if (!((seen_ >> i) & 1) && n.size() >= buf_.size() && n.compare(0, buf_.size(), buf_) == 0) return true;
      }
      return false;
    }
    case Leaf::kQuoteOpen:
      if (b != uint8_t(kQuote[pos_])) return false;
      if (++pos_ < kQuote.size()) return true;
      buf_.clear();
      if (const ToolParamSpec* p = top_param(); p && p->kind == ToolParamSpec::Kind::kChoice) {
        leaf_ = Leaf::kChoice;
        lo_ = 0;
        hi_ = uint32_t(p->choices.size());
        pos_ = 0;
      } else {
        leaf_ = Leaf::kString;
      }
      return true;
    case Leaf::kString:
      // Up to the closing quote; the block's close inside would end the call for the parser.
      buf_.push_back(char(b));
      if (buf_.size() > kClose.size()) buf_.erase(0, buf_.size() - kClose.size());
      if (std::string_view(buf_).ends_with(kQuote)) return end_value();
      return !std::string_view(buf_).ends_with(kClose);
    case Leaf::kChoice: {
      const auto& choices = top_param()->choices;
      if (b == '<' && choices[lo_].size() == pos_) {  // a whole choice (it sorts first)
        leaf_ = Leaf::kQuoteClose;
        pos_ = 1;
        return true;
      }
      const auto [lo, hi] = narrow_candidates(choices, lo_, hi_, pos_, b);
      if (lo == hi) return false;
      lo_ = lo;
      hi_ = hi;
      ++pos_;
      return true;
    }
    case Leaf::kQuoteClose:
      if (b != uint8_t(kQuote[pos_])) return false;
      if (++pos_ == kQuote.size()) return end_value();
      return true;
    case Leaf::kScalar:
      if (b == ',' || b == '}' || b == ']') {
        if (!scalar_.complete() || !end_value()) return false;
        return step_args(b);
      }
      if (is_json_ws(b) || (integer_ && (b == '.' || b == 'e' || b == 'E'))) return false;
      return scalar_.step(b);
    case Leaf::kNone:
      break;
  }
  Level& level = levels_[size_t(depth_ - 1)];
  const auto close = [&] {
    if (depth_ == 1) {
      const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
      if ((f.required & ~seen_) != 0) return false;
      depth_ = 0;
      phase_ = Phase::kClose;
      pos_ = 0;
      return true;
    }
    --depth_;
    return end_value();
  };
  const auto start_key = [&] {
    if (!key_byte(b) || is_json_ws(b)) return false;
    leaf_ = Leaf::kKey;
    buf_.clear();
    return step_args(b);
  };
  if (level.array) {
    switch (level.slot) {
      case Slot::kFirst:
        if (b == ']') return close();
        return begin_value(b);
      case Slot::kAfterValue:
        if (b == ']') return close();
        if (b != ',') return false;
        level.slot = Slot::kNeedValue;
        return true;
      default:
        return begin_value(b);
    }
  }
  switch (level.slot) {
    case Slot::kFirst:
      if (b == '}') return close();
      return start_key();
    case Slot::kNeedKey:
      return start_key();
    case Slot::kNeedValue:
      return begin_value(b);
    case Slot::kAfterValue: {
      if (b == '}') return close();
      if (b != ',') return false;
      if (depth_ == 1) {
        const ToolFunctionSpec& f = shared_->functions[size_t(fn_)];
        if (!f.open_params && uint32_t(__builtin_popcountll(seen_)) >= f.params.size()) return false;
      }
      level.slot = Slot::kNeedKey;
      return true;
    }
  }
  return false;
}

bool Gemma4ToolCallConstraint::step(uint8_t b) {
  switch (phase_) {
    case Phase::kFreeText:
      if (marker_reached(buf_, shared_->free_text_until, b)) {
        phase_ = Phase::kOpen;
        pos_ = 0;
      }
      return true;
    case Phase::kOpen:
      if (pos_ == 0 && !shared_->free_text_until.empty() && is_json_ws(b)) return true;
      if (b != uint8_t(kOpen[pos_])) return false;
      if (++pos_ == kOpen.size()) {
        phase_ = Phase::kName;
        buf_.clear();
      }
      return true;
    case Phase::kName: {
      const auto& fns = shared_->functions;
      if (b == '{') {
        for (size_t i = 0; i < fns.size(); ++i) {
          if (fns[i].name != buf_) continue;
          fn_ = int32_t(i);
          seen_ = 0;
          param_ = -1;
          depth_ = 1;
          levels_[0] = Level{.array = false, .slot = Slot::kFirst};
          leaf_ = Leaf::kNone;
          buf_.clear();
          phase_ = Phase::kArgs;
          return true;
        }
        return false;
      }
      buf_.push_back(char(b));
      return std::any_of(fns.begin(), fns.end(), [&](const ToolFunctionSpec& f) {
        return f.name.size() >= buf_.size() && f.name.compare(0, buf_.size(), buf_) == 0;
      });
    }
    case Phase::kArgs:
      return step_args(b);
    case Phase::kClose:
      if (b != uint8_t(kClose[pos_])) return false;
      if (++pos_ == kClose.size()) phase_ = Phase::kDone;
      return true;
    case Phase::kDone:
      return false;
  }
  return false;
}

}  // namespace brisk
