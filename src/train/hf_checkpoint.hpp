#pragma once
// Hugging Face checkpoints of GPT-2 and Llama: the weights as `transformers`' GPT2LMHeadModel or
// LlamaForCausalLM state dict in safetensors (io/safetensors.hpp), one file or the shards of a
// model.safetensors.index.json, with the model's config.json in the same directory.  `--init-from` and `--save` take them wherever
// they take mdtp's HDF5 checkpoints (train/checkpoint.hpp dispatches on the file name), so weights
// move between mdtp and PyTorch without a conversion script.
//
// What differs from mdtp's HDF5 checkpoint (docs/architecture.md, "File formats"):
//   - GPT-2's four Conv1D weights (attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj) are stored
//     [in, out], as Hugging Face's Conv1D holds them; mdtp's own layout is PyTorch Linear's
//     [out, in], so they are transposed on the way in and out.
//   - Weights only: no optimizer state, step or data position (a run from a safetensors file
//     starts at step 0 with fresh moments); resuming a run exactly needs the HDF5 checkpoint.
//   - Written with the `transformer.` prefix and without lm_head.weight (tied), as
//     GPT2LMHeadModel.save_pretrained writes them, in the optimizer's dtype (f32 masters for
//     bf16/f16 runs); read with or without the prefix (the hub's GPT-2 files have none), in F32,
//     F64, BF16 or F16, tolerating the causal-mask buffers attn.bias and attn.masked_bias and an
//     lm_head.weight equal to the token embedding, and refusing any other missing or extra tensor.
//   - config.json in Hugging Face's names (vocab_size, n_positions, n_embd, n_layer, n_head, ...);
//     a setting mdtp's GPT-2 does not implement is refused by name.
//   Llama (model_type "llama"): Linear weights [out, in] as mdtp keeps them; the fused qkv_proj and
//   gate_up_proj are written and read as q/k/v_proj and gate/up_proj (model/checkpoint_pieces.hpp);
//   keys with or without the model. prefix; lm_head.weight present when untied (and tolerated equal
//   to the embedding when tied); rotary_emb.inv_freq buffers ignored; config.json in LlamaConfig's
//   names, max_position_embeddings = the training sequence; rope_scaling, attention_bias, mlp_bias,
//   a head_dim other than hidden/heads, an activation other than silu refused by name.
#include <mpi.h>

#include <string>

#include "model/gpt.hpp"
#include "spec/run_spec.hpp"
#include "zero/zero_engine.hpp"

namespace mdtp {

// Whether `path` names a Hugging Face checkpoint: a ".safetensors" file or a safetensors index
// (a ".json" file, model.safetensors.index.json by Hugging Face's convention).
bool is_hf_checkpoint(const std::string& path);

// The causal-mask buffers nanoGPT and Hugging Face's GPT-2 keep beside the weights
// (h.<i>.attn.bias, h.<i>.attn.masked_bias): not parameters, ignored on load.
bool is_attention_mask_buffer(const std::string& key);

// The config.json in the checkpoint's directory, as a model shape; an error names the file and
// the field for anything missing, malformed or not implemented.
ModelShape read_hf_config(const std::string& path);

// Before a run that saves to `path` (a .safetensors file): an existing file there must be a
// safetensors file, and an existing config.json beside it must describe `model` (it is replaced by
// the run's own), so that a run never overwrites what it cannot reproduce.
void check_hf_output(const std::string& path, const ModelShape& model, const std::string& option);

// Collective over the model's mesh (every rank calls it); world rank 0 writes `path` and the
// config.json beside it, each through a temporary file renamed into place.
void save_hf_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world);

// Every rank reads and validates the whole checkpoint (names, shapes, dtypes, the config, a tied
// lm_head) before any parameter changes, then sets its parameters one tensor at a time.  The
// optimizer keeps its fresh state.
void load_hf_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine);

}  // namespace mdtp
