// The multi-token-prediction draft source (speculative.h, draft_source_mtp): the model's MTP block
// run in a context of its own, one position behind the target.
//
// Row p of the block's KV cache is made from the target's final-normed hidden state at position p
// and the token at p + 1. The target's hidden states arrive through observe() after every forward
// (prompt chunks, verify groups, replays), kept per slot from the oldest position the block may
// still need. Before drafting, the block's cache is cut back to the rows whose tokens still agree
// with the sequence (rows of rejected drafts and of the previous chain go), the rows of the verified
// positions it lacks are run in one forward, and the last one's logits give the first draft; each
// further draft runs the block on its own output hidden state and the draft before it (vLLM's and
// llama.cpp's chaining), at the next position. A position whose hidden state was never seen (a
// prefix another slot computed) gets a zero row: drafts get worse, the output stays exact.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "runtime/speculative.h"

namespace brisk {
namespace {

class MtpDraft final : public DraftSource {
 public:
  explicit MtpDraft(const MtpDraftOptions& o) {
    BRISK_CHECK(o.model != nullptr, "MTP draft: no model");
    ContextOptions c = o.context;
    c.state_checkpoints = false;  // one attention layer: cut back by seq_truncate
    ctx_ = Context::create_mtp(o.model, c);
    BRISK_CHECK(ctx_->set_keep_hidden(true), "MTP draft: the block's context keeps no hidden states");
    n_embd_ = size_t(o.model->info().n_embd);
    slots_.resize(size_t(ctx_->options().n_seq_max));
  }
  const char* name() const override { return "mtp"; }
  bool wants_hidden() const override { return true; }

  void observe(const std::vector<BatchToken>& batch, const Context& target) override {
    for (size_t i = 0; i < batch.size(); ++i) {
      const BatchToken& t = batch[i];
      const float* row = target.hidden(int32_t(i));
      if (!row || t.seq < 0 || t.seq >= int32_t(slots_.size())) continue;
      Slot& s = slots_[size_t(t.seq)];
      if (t.pos < s.base || s.tok.empty()) {  // the sequence was started again from t.pos
        s.base = t.pos;
        s.tok.clear();
        s.hid.clear();
      }
      const size_t at = size_t(t.pos - s.base);
      if (at >= s.tok.size()) {
        s.tok.resize(at + 1, -1);
        s.hid.resize((at + 1) * n_embd_, 0.0f);
      }
      s.tok[at] = t.token;
      std::memcpy(s.hid.data() + at * n_embd_, row, sizeof(float) * n_embd_);
    }
  }

  void propose(int32_t slot, const std::vector<int32_t>& h, int32_t pos0, int32_t n_max, const SamplerParams& sampling,
               Draft* out) override {
    out->tokens.clear();
    out->q.clear();
    if (slot < 0 || slot >= int32_t(slots_.size()) || h.size() < 2 || pos0 < 0) return;
    const int32_t n_ctx = ctx_->options().n_ctx;
    // The last verified position t (its hidden state and the pending token make the first draft);
    // the chain's rows take positions t + 1 .. t + n_max - 1.
    const int32_t t = pos0 + int32_t(h.size()) - 2;
    n_max = std::min(n_max, n_ctx - t);
    if (n_max <= 0) return;
    Slot& s = slots_[size_t(slot)];
    const int32_t len = int32_t(h.size());
    auto now = [&](int32_t p) { return p >= pos0 && p < pos0 + len ? h[size_t(p - pos0)] : -1; };
    auto before = [&](int32_t p) {
      return p >= s.held_pos0 && p < s.held_pos0 + int32_t(s.held.size()) ? s.held[size_t(p - s.held_pos0)] : -1;
    };
    // Rows [0, keep) stay: row p needs the tokens at p and p + 1 unchanged (rows of earlier turns,
    // below pos0 - 1, are the caller's to keep).
    const int32_t held_rows = std::min(ctx_->seq_length(slot), s.rows);
    int32_t keep = std::max(0, std::min(held_rows, pos0 - 1));
    while (keep < held_rows && before(keep + 1) == now(keep + 1) && (keep < pos0 || before(keep) == now(keep))) ++keep;
    keep = std::min(keep, t);  // row t is run again for its logits
    ctx_->seq_truncate(slot, keep);
    // Rows keep .. t in one forward (a token of an earlier turn that is not known any more, 0:
    // the rows stay in place, the drafts get worse).
    std::vector<BatchToken> batch;
    in_.assign(size_t(t - keep + 1) * n_embd_, 0.0f);
    for (int32_t p = keep; p <= t; ++p) {
      const int32_t next = p + 1 >= pos0 ? now(p + 1) : std::max(0, before(p + 1));
      batch.push_back({.token = next, .pos = p, .seq = slot, .want_logits = p == t});
      const int64_t at = int64_t(p) - s.base;
      const bool known = at >= 0 && at < int64_t(s.tok.size()) && s.tok[size_t(at)] >= 0 &&
                         (p < pos0 || s.tok[size_t(at)] == now(p));
      if (known)
        std::memcpy(in_.data() + size_t(p - keep) * n_embd_, s.hid.data() + size_t(at) * n_embd_, sizeof(float) * n_embd_);
    }
    ctx_->set_next_hidden_in(in_.data());
    ctx_->decode(batch);
    s.rows = t + 1;
    s.held.assign(h.begin(), h.end());
    s.held_pos0 = pos0;
    forget_before(s, t);

    Sampler sampler(draft_sampler_params(sampling, ctx_->n_vocab(), ctx_->n_vocab(), draws_++), ctx_->n_vocab());
    int32_t last = int32_t(batch.size()) - 1;  // the row whose hidden state the chain continues from
    for (int32_t i = 0; i < n_max; ++i) {
      const int32_t tok = draft_pick(sampler, ctx_->logits(0), out);
      if (i + 1 == n_max) break;
      in_.assign(ctx_->hidden(last), ctx_->hidden(last) + n_embd_);
      ctx_->set_next_hidden_in(in_.data());
      ctx_->decode({{.token = tok, .pos = t + 1 + i, .seq = slot, .want_logits = true}});
      last = 0;
    }
  }

 private:
  struct Slot {
    int32_t rows = 0;              // the block's rows made from verified positions [0, rows)
    std::vector<int32_t> held;     // the history of the last propose, from position held_pos0
    int32_t held_pos0 = 0;
    int32_t base = 0;              // target position of tok[0] / hid's first row
    std::vector<int32_t> tok;      // [positions from base] the target's token there (-1: not seen)
    std::vector<float> hid;        // [positions from base, n_embd] its final-normed hidden state
  };

  // Hidden states of positions before `pos` are in the block's rows already: dropped.
  void forget_before(Slot& s, int32_t pos) const {
    const int64_t drop = std::min<int64_t>(int64_t(pos) - s.base, int64_t(s.tok.size()));
    if (drop <= 0) return;
    s.tok.erase(s.tok.begin(), s.tok.begin() + drop);
    s.hid.erase(s.hid.begin(), s.hid.begin() + drop * int64_t(n_embd_));
    s.base += int32_t(drop);
  }

  std::unique_ptr<Context> ctx_;
  size_t n_embd_ = 0;
  std::vector<Slot> slots_;   // [n_seq_max]
  std::vector<float> in_;     // hidden-state rows of the block's next forward
  uint64_t draws_ = 0;
};

}  // namespace

std::unique_ptr<DraftSource> draft_source_mtp(const MtpDraftOptions& options) { return std::make_unique<MtpDraft>(options); }

}  // namespace brisk
