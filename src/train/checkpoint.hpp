#pragma once
// HDF5 checkpoints in nanoGPT's vocabulary (docs/architecture.md, "File formats"):
//   root attributes  vocab_size, n_layer, n_head, n_embd, block_size (integers)
//   /<key>           one dataset per parameter, full and unsharded, PyTorch layout ([out, in] for
//                    Linear weights), f32 or f64 (either is accepted on load); the LM head is tied
//                    to transformer.wte.weight and not stored (an equal lm_head.weight is accepted)
//   /optim           attributes step, data_position, rng_state, optimizer; for AdamW
//                    /optim/exp_avg/<key> and /optim/exp_avg_sq/<key> in the same layout
// Sharding never shows: save gathers every shard (collective over tp, and over dp under ZeRO) and
// every pipeline stage's tensors onto world rank 0 (the tied wte once), one tensor at a time; load
// cuts each rank's shard out of the full tensor, so a checkpoint written in one mode, pipeline
// split, data-parallel size or ZeRO stage resumes in any other.
// Saving writes a temporary file renamed into place (a failed run never truncates an existing
// checkpoint); loading reads on every rank and validates everything before changing the model,
// so a bad file fails on every rank with the same message.
// A path ending in .safetensors (or a safetensors index, .json) is a Hugging Face checkpoint
// instead: weights only, in transformers' GPT-2 names and layout (train/hf_checkpoint.hpp).
#include <mpi.h>

#include <cstdint>
#include <string>

#include "train/loss_scaler.hpp"
#include "model/gpt.hpp"
#include "zero/zero_engine.hpp"

namespace mdtp {

struct TrainingState {
  std::int64_t step = 0;           // optimizer steps completed
  std::int64_t data_position = 0;  // first row of the next global batch
  std::uint64_t rng_state = 0;     // seed of the counter-based generator (training draws nothing)
  LossScalerState loss_scaler;     // f16's dynamic loss scale (train/loss_scaler.hpp)
  bool has_loss_scaler = false;    // a loaded checkpoint carried one
};

// The root attributes, validated (present, integers, positive).
ModelShape read_checkpoint_config(const std::string& path);

// Collective over the model's mesh (every rank calls it); rank 0 of `world` writes.
void save_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, const TrainingState& state,
                     MPI_Comm world);
// Every rank reads `path`; the model's configuration must equal the file's.  Sets every parameter,
// and the engine's moments and step when the file holds state of the same optimizer kind.
// Returns the saved training state (all zero when the file has no /optim).  Collective over
// `world` at ZeRO-3, where each rank reads and verifies only its shards' blocks and the ranks
// agree on the outcome; every rank throws the same error for a bad file.
TrainingState load_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world);

// Every parameter's reduced gradient (between the engine's finish_gradients and step), full and in
// checkpoint layout, with the config attributes and `step`/`loss` attributes (to compare with
// PyTorch); gradients scaled by an f16 loss scale are written unscaled.  Collective like
// save_checkpoint.
void dump_gradients(const std::string& path, GptModel& model, ZeroEngine& engine, std::int64_t step, double loss,
                    MPI_Comm world, double loss_scale = 1.0);

}  // namespace mdtp
