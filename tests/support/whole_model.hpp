#pragma once
// A whole GPT (one chunk of every unit) run on one micro-batch outside any engine: what the model
// and layer tests compare with their float64 references.  The trainer never runs a model this way
// (it runs schedules through the pipeline executor), so this lives with the tests, not the model.
#include <cstdint>
#include <span>

#include "model/gpt.hpp"

namespace mdtp::testing {

// Forward, backward and the mean loss over every replica's tokens; accumulates the (unreduced)
// gradients.  An mdtp::Error when the model holds a pipeline split rather than the whole model.
double forward_backward(GptModel& model, std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);
// The same mean loss without backward.
double whole_model_loss(GptModel& model, std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets);

}  // namespace mdtp::testing
