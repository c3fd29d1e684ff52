// The memory model against the backend's MemoryTracker, on every mode and mesh of the TP suite:
// parameters and gradients of the layer exactly (their peaks while the layer is built), and the
// activations forward leaves alive for backward exactly (plus the output shard, which the caller
// holds), with no communication buffer left over.  GPT-2's layers and Llama's.
#include <catch2/catch.hpp>

#include "cost/memory_model.hpp"
#include "cost_cases.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

// The model's parameters, gradients and kept activations of one layer against the tracker.
template <class Layer>
void check_layer_memory(ModeFixture& f, const cost::Workload& w) {
  MemoryTracker& tracker = f.backend->allocator().tracker();
  const cost::MemoryEstimate model = cost::estimate_memory(w, 12.0);
  tracker.reset_peaks();
  const std::int64_t params0 = tracker.current(MemCategory::parameters);
  const std::int64_t grads0 = tracker.current(MemCategory::gradients);
  Layer l(f, w);
  CHECK(tracker.peak(MemCategory::parameters) - params0 == model.parameter_bytes);
  CHECK(tracker.peak(MemCategory::gradients) - grads0 == model.gradient_bytes);
  CHECK(tracker.current(MemCategory::parameters) - params0 == model.parameter_bytes);
  std::int64_t elements = 0;
  for (Parameter* p : l.parameters()) elements += p->value.numel();
  CHECK(elements == model.parameter_elements);
  CHECK(model.optimizer_bytes == 12 * model.parameter_elements);

  const std::int64_t act0 = tracker.current(MemCategory::activations);
  const std::int64_t comm0 = tracker.current(MemCategory::communication);
  Tensor x = l.input();
  Tensor y = l.forward(x);
  x = Tensor();  // the caller lets go of the input: what remains is the layer's doing
  CHECK(y.bytes() == static_cast<std::size_t>(model.output_bytes));
  CHECK(tracker.current(MemCategory::activations) - act0 == model.activation_bytes + model.output_bytes);
  CHECK(tracker.current(MemCategory::communication) == comm0);
  l.backward(l.output_grad());
}

}  // namespace

TEST_CASE("estimate_memory equals the MemoryTracker's bytes for Llama's layers", "[cost][memory][llama]") {
  // No biases, RMSNorm's γ alone (its constant zero shift is bookkeeping, in `other`), the gated
  // MLP's 2F-wide fc1 output kept for SwiGLU's backward and its F-wide output kept by fc2.
  for (const ModeCase& c : cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label() << " llama") {
      ModeFixture f(c, DType::f64);
      for (const char* layer : {"linear", "layernorm", "mlp"}) {
        INFO("llama layer " << layer);
        check_layer_memory<LlamaLayerUnderTest>(f, llama_workload_for(c, layer, DType::f64, ""));
      }
    }
  }
}

TEST_CASE("estimate_memory equals the MemoryTracker's bytes on every mode and mesh", "[cost][memory]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (bool keep : {false, true}) {
      if (keep && c.mode != TpMode::d3) continue;
      DYNAMIC_SECTION(c.label() << (keep ? " keep-gathered" : "")) {
        TpOptions options;
        options.keep_gathered_3d = keep;
        ModeFixture f(c, DType::f64, options);
        for (const char* layer : {"linear", "layernorm", "mlp"}) {
          INFO("layer " << layer);
          check_layer_memory<LayerUnderTest>(f, workload_for(c, layer, DType::f64, keep, ""));
        }
      }
    }
  }
}
