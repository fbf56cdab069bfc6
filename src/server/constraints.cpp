#include "server/constraints.h"

#include "core/error.h"
#include "text/tokenizer.h"

namespace brisk::server {

std::shared_ptr<const TokenMask> model_token_mask(LoadedModel& model) {
  std::lock_guard<std::mutex> lock(model.mask_mu);
  if (!model.token_mask) {
    const int32_t n_vocab = model.scheduler->n_vocab();
    std::vector<std::string> texts(static_cast<size_t>(n_vocab));
    const int32_t n_tok = model.tokenizer->vocab_size();
    for (int32_t i = 0; i < n_vocab && i < n_tok; ++i) {
      try {
        texts[size_t(i)] = model.tokenizer->decode({i}, false);
      } catch (const std::exception&) {
        // Left empty: never allowed under a constraint.
      }
    }
    std::vector<int32_t> ends;
    for (int32_t id : model.end_ids)
      if (id >= 0 && id < n_vocab) ends.push_back(id);
    model.vocab_texts = std::make_shared<const std::vector<std::string>>(std::move(texts));
    model.token_mask = std::make_shared<const TokenMask>(*model.vocab_texts, ends);
  }
  return model.token_mask;
}

namespace {

template <class C>
class MaskedConstraint : public TokenConstraint {
 public:
  MaskedConstraint(C constraint, std::shared_ptr<const TokenMask> mask,
                   std::shared_ptr<const std::vector<std::string>> texts, std::vector<int32_t> ends)
      : c_(std::move(constraint)), mask_(std::move(mask)), texts_(std::move(texts)), ends_(std::move(ends)) {}
  const std::vector<bool>* allowed() override {
    mask_->compute(c_, allowed_);
    return &allowed_;
  }
  void accept(int32_t token) override {
    for (int32_t e : ends_)
      if (e == token) return;
    const std::string& t = texts_->at(size_t(token));
    // The mask only allows accepted texts; a sampler ignoring the mask is caught here.
    BRISK_CHECK(c_.accepts(t), "constrained output: token ", token, " breaks the constraint");
    c_.advance(t);
  }

 private:
  C c_;
  std::shared_ptr<const TokenMask> mask_;
  std::shared_ptr<const std::vector<std::string>> texts_;
  std::vector<int32_t> ends_;
  std::vector<bool> allowed_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_json_constraint(LoadedModel& model) {
  auto mask = model_token_mask(model);
  return std::make_unique<MaskedConstraint<JsonConstraint>>(
      JsonConstraint({.require_object = true, .max_depth = 64, .max_whitespace_run = 4, .finite_numbers = true}), mask,
      model.vocab_texts,
      model.end_ids);
}

std::unique_ptr<TokenConstraint> make_schema_constraint(LoadedModel& model, std::shared_ptr<const CompiledSchema> schema) {
  auto mask = model_token_mask(model);
  return std::make_unique<MaskedConstraint<SchemaConstraint>>(SchemaConstraint(std::move(schema), 4), mask,
                                                              model.vocab_texts, model.end_ids);
}

std::unique_ptr<TokenConstraint> make_tool_call_constraint(LoadedModel& model, std::vector<std::string> names,
                                                           const std::string& free_text_until,
                                                           std::vector<std::shared_ptr<const CompiledSchema>> schemas) {
  ToolCallSyntax syntax = tool_call_syntax(model.chat_format);
  syntax.free_text_until = free_text_until;
  auto mask = model_token_mask(model);
  return std::make_unique<MaskedConstraint<ToolCallConstraint>>(
      ToolCallConstraint(std::move(syntax), std::move(names),
                         {.require_object = true, .max_depth = 64, .max_whitespace_run = 4}, std::move(schemas)),
      mask, model.vocab_texts, model.end_ids);
}

std::unique_ptr<TokenConstraint> make_xml_tool_call_constraint(LoadedModel& model, std::vector<ToolFunctionSpec> functions,
                                                               const std::string& free_text_until) {
  auto mask = model_token_mask(model);
  return std::make_unique<MaskedConstraint<XmlToolCallConstraint>>(
      XmlToolCallConstraint(std::move(functions), free_text_until, 4), mask, model.vocab_texts, model.end_ids);
}

std::unique_ptr<TokenConstraint> make_gemma4_tool_call_constraint(LoadedModel& model,
                                                                  std::vector<ToolFunctionSpec> functions,
                                                                  const std::string& free_text_until) {
  auto mask = model_token_mask(model);
  return std::make_unique<MaskedConstraint<Gemma4ToolCallConstraint>>(
      Gemma4ToolCallConstraint(std::move(functions), free_text_until), mask, model.vocab_texts, model.end_ids);
}

}  // namespace brisk::server
