#pragma once
// How a parameter's checkpoint tensor is stored: as one dataset named after the parameter, or — for
// the tensors mdtp fuses and Hugging Face keeps apart — as the row blocks of its [out, in] tensor
// under Hugging Face's names, so that a checkpoint holds exactly the state dict of
// LlamaForCausalLM:
//   model.layers.<i>.self_attn.qkv_proj.weight → q_proj (heads·d rows), k_proj (kv·d), v_proj (kv·d)
//   model.layers.<i>.mlp.gate_up_proj.weight   → gate_proj (F rows), up_proj (F rows)
// Derived from the name and the model's shape alone, so that the rank writing a checkpoint can
// split tensors of pipeline stages it does not hold.
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "spec/run_spec.hpp"

namespace mdtp {

struct CheckpointPiece {
  std::string name;
  std::int64_t first_row = 0, rows = 0;  // rows of the parameter's checkpoint tensor ([out, in])
  Shape shape;                           // the dataset's: [rows, in], or the whole 1-D tensor
};

// The datasets of parameter `name` of `config` whose checkpoint tensor has shape `full` (a 1-D
// tensor is one row): one piece of every row named `name`, or the fused tensor's parts.
std::vector<CheckpointPiece> checkpoint_pieces(const std::string& name, const Shape& full, const ModelShape& config);

}  // namespace mdtp
