#include "model/gpt_config.hpp"

#include <sstream>

#include "core/error.hpp"

namespace mdtp {

void validate(const ModelShape& c) {
  const std::pair<const char*, std::int64_t> fields[] = {{"vocab_size", c.vocab}, {"n_layer", c.layers},
                                                         {"n_head", c.heads},         {"n_embd", c.hidden},
                                                         {"block_size", c.seq}};
  for (const auto& [name, value] : fields) require(value > 0, "GPT config: ", name, " must be positive; got ", value);
  require(c.hidden % c.heads == 0, "GPT config: n_embd=", c.hidden, " must be divisible by n_head=", c.heads,
          " (every head has n_embd/n_head features)");
  require(c.vocab <= 2147483647LL, "GPT config: vocab_size=", c.vocab, " does not fit int32 token ids");
  require(c.norm == NormKind::layernorm && c.position == PositionKind::learned && c.tied_head &&
              c.ffn() == 4 * c.hidden && c.kv() == c.heads,
          "GPT config: this model is GPT-2 (layernorm, learned positions, tied head, MLP 4 x n_embd, kv heads = "
          "n_head); got norm ", norm_kind_name(c.norm), ", position ", position_kind_name(c.position), ", tied_head ",
          c.tied_head ? "true" : "false", ", ffn ", c.ffn(), ", kv_heads ", c.kv());
}

std::string describe(const ModelShape& c) {
  std::ostringstream os;
  os << "vocab " << c.vocab << ", " << c.layers << " layers, " << c.heads << " heads, embd " << c.hidden
     << ", block " << c.seq;
  return os.str();
}

}  // namespace mdtp
