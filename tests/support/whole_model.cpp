#include "support/whole_model.hpp"

#include "core/error.hpp"
#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp::testing {
namespace {

ModelChunk& whole(GptModel& model) {
  const int units = static_cast<int>(model.config().layers) + 2;
  require(model.chunks().size() == 1 && model.holds(0) && model.holds(units - 1),
          "GPT model: loss() and forward_backward() run the whole model; this one holds a pipeline split");
  return model.chunk(0);
}

// The chunk's forward on micro-batch 0, and the step's mean loss from this rank's local sum.
double forward(GptModel& model, ModelChunk& chunk, std::span<const std::int32_t> inputs,
               std::span<const std::int32_t> targets, ChunkSaved& saved) {
  PhaseScope scope(model.mode().context().mesh.ledger(), phase::forward);
  double local = 0.0;
  chunk.forward(Tensor(), MicroBatch{inputs, targets, 0}, saved, &local);
  return model.reduce_loss(local, 1);
}

}  // namespace

double forward_backward(GptModel& model, std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  ModelChunk& chunk = whole(model);
  ChunkSaved saved;
  const double mean = forward(model, chunk, inputs, targets, saved);
  PhaseScope scope(model.mode().context().mesh.ledger(), phase::backward);
  chunk.backward(Tensor(), model.loss_scale(1), saved, true);
  return mean;
}

double whole_model_loss(GptModel& model, std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets) {
  ModelChunk& chunk = whole(model);
  ChunkSaved saved;
  return forward(model, chunk, inputs, targets, saved);  // no backward follows: the context dies here
}

}  // namespace mdtp::testing
