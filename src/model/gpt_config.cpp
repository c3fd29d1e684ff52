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
  require(c.norm_eps > 0, "GPT config: norm_eps must be positive; got ", c.norm_eps);
  if (c.family == ModelFamily::gpt2) {
    require(c.ffn() == 4 * c.hidden && c.kv() == c.heads, "GPT config: a gpt2 model has an MLP of 4 x n_embd = ",
            4 * c.hidden, " and kv heads = n_head = ", c.heads, "; got ffn ", c.ffn(), ", kv_heads ", c.kv());
  } else {
    require(c.kv() > 0 && c.heads % c.kv() == 0, "Llama config: num_key_value_heads=", c.kv(),
            " must divide num_attention_heads=", c.heads);
    require((c.hidden / c.heads) % 2 == 0, "Llama config: the rotary embedding needs an even head_dim; got ",
            c.hidden / c.heads);
    require(c.rope_theta > 0, "Llama config: rope_theta must be positive; got ", c.rope_theta);
  }
}

std::string describe(const ModelShape& c) {
  std::ostringstream os;
  os << "vocab " << c.vocab << ", " << c.layers << " layers, " << c.heads << " heads, embd " << c.hidden
     << ", block " << c.seq;
  if (c.family == ModelFamily::gpt2 && !c.tied_head) os << ", untied head";
  if (c.family == ModelFamily::llama)
    os << " (llama: kv heads " << c.kv() << ", ffn " << c.ffn() << ", " << (c.tied_head ? "tied" : "untied")
       << " head, theta " << c.rope_theta << ", eps " << c.norm_eps << ")";
  return os.str();
}

}  // namespace mdtp
