// Word timestamps of speech decoding: tokens aligned to audio frames from the cross-attention
// of a model's alignment heads (transformers' _extract_token_timestamps and openai-whisper's
// find_alignment compute the same):
//   1. per head, the attention of each decoder position over the window's first n_frames / 2
//      encoder positions, standardised per encoder position over the decoder positions
//      (mean 0, population standard deviation 1);
//   2. a median filter of odd width along the encoder positions (reflect-padded edges);
//   3. the mean over the heads, negated, as the cost of a monotonic dynamic time warping path
//      from (0, 0) to (tokens, frames) by steps (1, 1), (1, 0) and (0, 1);
//   4. each token's time is the encoder position where the path first reaches its row.
// Words group the tokens at spaces (or per character in languages written without spaces) and
// take leading / trailing punctuation along.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace brisk {

class Tokenizer;

// In place along the rows of x [rows, cols]: each value := median of its width-neighbourhood.
void speech_median_filter(float* x, int64_t rows, int64_t cols, int32_t width);
// The warping path of cost [n, m] (row-major): text (row) and time (column) indices, in order.
void speech_dtw(const std::vector<double>& cost, int64_t n, int64_t m, std::vector<int64_t>* text_idx,
                std::vector<int64_t>* time_idx);
// heads: [n_heads][n_tok * n_cols] attention rows, standardised and filtered over all n_tok rows;
// the path runs over rows [row_begin, row_end). Returns the aligned column of each of those rows.
std::vector<int64_t> speech_align_tokens(const std::vector<std::vector<float>>& heads, int64_t n_tok, int64_t n_cols,
                                         int32_t median_width, int64_t row_begin, int64_t row_end);

struct SpeechWordSpan {
  std::string text;                  // decoded, leading space kept
  std::vector<int32_t> token_index;  // indices into the token list
  // The tokens [timing_begin, timing_end) of the word before punctuation joined it: its start is
  // the time of timing_begin, its end the time of timing_end (the next word's first token).
  int32_t timing_begin = 0;
  int32_t timing_end = 0;
};
// Words of text tokens. `no_spaces` splits per decoded character (Chinese, Japanese, Thai, Lao,
// Burmese, Cantonese); otherwise a word starts at a space or a punctuation mark. Leading
// punctuation ("'“¿([{-) joins the next word, trailing punctuation the previous one.
std::vector<SpeechWordSpan> speech_split_words(const Tokenizer& tok, const std::vector<int32_t>& tokens, bool no_spaces);

}  // namespace brisk
