// The step model's list of the engine's own kernels (cost/engine_kernels.hpp, `mdtp cost
// --engine-kernels`) against the kernels the engine launches, counted by the charging backend and
// model kernels a simulated cluster uses (simulate/kernel_tally.hpp): one training step with two
// blocks minus the same step with one leaves one block's kernels for every micro-batch, plus its
// parameters' optimizer kernels.  Per kind, its calls and bytes equal the model's list times the
// micro-batches, exactly, in every TP mode, for GPT-2 and Llama (RMSNorm, SwiGLU, rotary positions,
// no biases), on 1, 2, 4 and 8 ranks.  The one-block step's kernels, per kind, equal the block's,
// the embedding's and the head's lists times the micro-batches (the optimizer's apart).
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <string>

#include "cost/cluster.hpp"
#include "cost/layer_costs.hpp"
#include "model/gpt_kernels.hpp"
#include "simulate/charging_backend.hpp"
#include "simulate/charging_gpt_kernels.hpp"
#include "simulate/kernel_tally.hpp"
#include "support/gpt_harness.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct KernelCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, micro_batches = 2;
  bool llama = false;
};

std::vector<KernelCase> kernel_cases(int world) {
  switch (world) {
    case 1: return {{"none", TpMode::none}, {"llama none", TpMode::none, 1, 1, 2, true}};
    case 2: return {{"1d tp2", TpMode::d1, 2}, {"1d-sp tp2", TpMode::d1_sp, 2}, {"llama 1d-sp tp2", TpMode::d1_sp, 2, 1, 2, true}};
    case 4: return {{"2d tp4", TpMode::d2, 4}, {"1d tp4 m3", TpMode::d1, 4, 1, 3}, {"llama 2d tp4", TpMode::d2, 4, 1, 2, true}};
    case 8: return {{"2.5d tp8 d2", TpMode::d2p5, 8, 2}, {"3d tp8", TpMode::d3, 8}, {"llama 3d tp8", TpMode::d3, 8, 1, 2, true}};
    default: return {};
  }
}

const cost::Cluster& h100() {
  static const cost::Cluster c = cost::load_cluster(cost::find_cluster("dgx-h100"));
  return c;
}

struct StepKernels {
  std::map<std::string, simulate::KernelKindCharge> kinds;
  RunSpec spec;  // as it ran (the vocabulary from the data)
};

// The kernels one training step charged on this rank, by kind.
StepKernels step_kernels(TrainConfig t) {
  auto tally = std::make_shared<simulate::KernelTally>();
  t.device.make_backend = [tally](MPI_Comm) -> std::unique_ptr<Backend> {
    return std::make_unique<simulate::ChargingBackend>(make_host_backend(), h100(), nullptr, tally);
  };
  t.device.make_kernels = [tally](const Backend& backend) -> std::unique_ptr<GptKernels> {
    return std::make_unique<simulate::ChargingGptKernels>(make_host_gpt_kernels(backend), h100(), nullptr, tally);
  };
  t.on_steps = [tally](bool running) { tally->set_counting(running); };
  const TrainResult result = train(t, MPI_COMM_WORLD);
  return {tally->kinds(), result.spec};
}

}  // namespace

TEST_CASE("the model's list of the engine's kernels equals what one block launches, per kind, to the byte",
          "[simulate][kernels]") {
  const int world = world_size();
  for (const KernelCase& c : kernel_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      TrainConfig t;
      t.spec.layout.mode = c.mode;
      t.spec.layout.tp = c.tp;
      t.spec.layout.depth = c.depth;
      t.spec.layout.micro_batches = c.micro_batches;
      t.spec.model = ModelShape{1, 32, 4, 16, 0};
      if (c.llama) {
        t.spec.model.family = ModelFamily::llama;
        t.spec.model.kv_heads = 2;
        t.spec.model.ffn_hidden = 40;
        t.spec.model.tied_head = false;
      }
      const int dp = world / c.tp;
      const std::int64_t sequences = 2 * (c.mode == TpMode::d3 || c.mode == TpMode::d2p5 ? 2 : 1);
      t.spec.global_batch = sequences * dp * c.micro_batches;
      t.steps = 1;
      const StepKernels one_block = step_kernels(t);
      t.spec.model.layers = 2;
      const auto two = step_kernels(t).kinds;
      const auto& one = one_block.kinds;

      const cost::LayerCosts costs = cost::layer_costs(one_block.spec.model, c.mode, c.tp, c.depth, sequences, DType::f32,
                                                       h100(), {.engine_kernels = true});
      std::map<std::string, simulate::KernelKindCharge> expected;
      const double m = c.micro_batches;
      for (const auto* pass :
           {&costs.block_kernels.forward, &costs.block_kernels.backward_input, &costs.block_kernels.backward_weight})
        for (const cost::KernelCall& k : *pass) {
          expected[k.kind].calls += c.micro_batches;
          expected[k.kind].bytes += m * k.bytes;
        }
      // The optimizer's kernels per parameter tensor (no ZeRO): zeroed, squared for the norm, updated.
      for (const char* kind : {"fill", "sum_squares", "adamw_update"}) expected[kind].calls += costs.block_param_tensors;

      std::map<std::string, simulate::KernelKindCharge> block;
      for (const auto& [kind, k] : two) {
        const auto o = one.find(kind);
        const std::int64_t calls = k.calls - (o == one.end() ? 0 : o->second.calls);
        const double bytes = k.bytes - (o == one.end() ? 0.0 : o->second.bytes);
        if (calls != 0) block[kind] = {calls, bytes, 0.0};
      }
      for (const auto& [kind, k] : block) {
        if (kind == "gemm") continue;  // the GEMM list is plan_gemms' (compute_model.hpp)
        INFO(c.label << " " << kind << ": engine " << k.calls << " calls, " << k.bytes << " B; model "
                     << expected[kind].calls << " calls, " << expected[kind].bytes << " B");
        CHECK(k.calls == expected[kind].calls);
        if (kind != "fill" && kind != "sum_squares" && kind != "adamw_update") CHECK(k.bytes == expected[kind].bytes);
      }
      for (const auto& [kind, k] : expected) {
        INFO(c.label << ": the model lists " << kind << ", which the engine did not launch");
        CHECK(block.count(kind) == 1);
      }

      // The whole one-block step: the block, the embedding and the head for every micro-batch
      // (the optimizer's kinds apart: their bytes follow the parameters, checked above by count).
      std::map<std::string, simulate::KernelKindCharge> step;
      for (const cost::UnitKernels* unit : {&costs.block_kernels, &costs.embedding_kernels, &costs.head_kernels})
        for (const auto* pass : {&unit->forward, &unit->backward_input, &unit->backward_weight})
          for (const cost::KernelCall& k : *pass) {
            step[k.kind].calls += c.micro_batches;
            step[k.kind].bytes += m * k.bytes;
          }
      const auto optimizer = [](const std::string& kind) {
        return kind == "gemm" || kind == "fill" || kind == "sum_squares" || kind == "adamw_update";
      };
      for (const auto& [kind, k] : one) {
        if (optimizer(kind)) continue;
        INFO(c.label << " one-block step, " << kind << ": engine " << k.calls << " calls, " << k.bytes
                     << " B; model " << step[kind].calls << " calls, " << step[kind].bytes << " B");
        CHECK(k.calls == step[kind].calls);
        CHECK(k.bytes == step[kind].bytes);
      }
      for (const auto& [kind, k] : step) {
        INFO(c.label << ": the model lists " << kind << " in a one-block step, which the engine did not launch");
        CHECK((optimizer(kind) || one.count(kind) == 1));
      }
    }
  }
}
