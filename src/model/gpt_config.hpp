#pragma once
// The GPT-2 architecture hyper-parameters, named as nanoGPT names them (and as checkpoints store
// them as root attributes).
#include <cstdint>
#include <string>

namespace mdtp {

struct GptConfig {
  std::int64_t vocab_size = 0;
  std::int64_t n_layer = 0;
  std::int64_t n_head = 0;
  std::int64_t n_embd = 0;
  std::int64_t block_size = 0;  // sequence length T of every training row
  bool operator==(const GptConfig&) const = default;
};

// Throws an mdtp::Error naming the first value that is not positive, or n_embd not divisible by
// n_head.  Checked on every rank before anything is built.
void validate(const GptConfig& config);
std::string describe(const GptConfig& config);  // "vocab 65, 2 layers, 4 heads, embd 64, block 32"

}  // namespace mdtp
