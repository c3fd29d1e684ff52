#include "model/gpt_config.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp {

void validate(const GptConfig& c) {
  const std::pair<const char*, std::int64_t> fields[] = {{"vocab_size", c.vocab_size}, {"n_layer", c.n_layer},
                                                         {"n_head", c.n_head},         {"n_embd", c.n_embd},
                                                         {"block_size", c.block_size}};
  for (const auto& [name, value] : fields) require(value > 0, "GPT config: ", name, " must be positive; got ", value);
  require(c.n_embd % c.n_head == 0, "GPT config: n_embd=", c.n_embd, " must be divisible by n_head=", c.n_head,
          " (every head has n_embd/n_head features)");
  require(c.vocab_size <= 2147483647LL, "GPT config: vocab_size=", c.vocab_size, " does not fit int32 token ids");
}

std::string describe(const GptConfig& c) {
  std::ostringstream os;
  os << "vocab " << c.vocab_size << ", " << c.n_layer << " layers, " << c.n_head << " heads, embd " << c.n_embd
     << ", block " << c.block_size;
  return os.str();
}

}  // namespace mdtp
