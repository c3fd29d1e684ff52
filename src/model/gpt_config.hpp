#pragma once
// The GPT-2 model's shape is the run spec's ModelShape (spec/run_spec.hpp): layers, hidden, heads,
// seq (T of every training row), vocab.  Checkpoints store it under nanoGPT's names (n_layer,
// n_embd, n_head, block_size, vocab_size: train/checkpoint.hpp), and the messages below use them.
#include <string>

#include "spec/run_spec.hpp"

namespace mdtp {

// Throws an mdtp::Error naming the first value that is not positive, hidden not divisible by
// heads, or a member of a model family this GPT-2 does not build (rmsnorm, rope, an MLP other than
// 4·hidden, grouped-query attention; its head may be tied or untied).  Checked on every rank
// before anything is built.
void validate(const ModelShape& config);
std::string describe(const ModelShape& config);  // "vocab 65, 2 layers, 4 heads, embd 64, block 32"

}  // namespace mdtp
