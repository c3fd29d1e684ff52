// The acceptance test: on every mode and mesh of the TP suite, the real layer (Linear,
// LayerNorm, MLP) run under "forward" / "backward" / "grad-sync" records, on EVERY rank, exactly
// the collectives plan_step predicts — per (phase, group, op): calls, logical bytes and group size
// equal, bus bytes within 1e-9 relative — and, stronger, the same ordered list of calls.  Both 3D
// keep options, with and without the data-parallel gradient sum, in f64 and f32.  Llama's layers
// (a Linear without a bias, RMSNorm, the SwiGLU MLP over a fused gate|up) likewise, in f32.
#include <catch2/catch.hpp>

#include <cmath>
#include <sstream>

#include "cost_cases.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

std::string describe(const LedgerKey& k) {
  std::ostringstream os;
  os << k.phase << "/" << k.group << "/" << collective_name(k.op);
  return os.str();
}

int this_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

void require_summaries_equal(const std::map<LedgerKey, LedgerTotals>& measured,
                             const std::map<LedgerKey, LedgerTotals>& predicted) {
  for (const auto& [key, m] : measured) {
    INFO("rank " << this_rank() << ": ledger has " << describe(key) << " (" << m.calls << " calls, " << m.logical_bytes
                 << " bytes)");
    REQUIRE(predicted.count(key) == 1);
  }
  for (const auto& [key, p] : predicted) {
    INFO("rank " << this_rank() << ": " << describe(key));
    REQUIRE(measured.count(key) == 1);
    const LedgerTotals& m = measured.at(key);
    CHECK(m.calls == p.calls);
    CHECK(m.logical_bytes == p.logical_bytes);
    CHECK(m.group_size == p.group_size);
    CHECK(std::abs(m.bus_bytes - p.bus_bytes) <= 1e-9 * std::max(1.0, std::abs(p.bus_bytes)));
  }
}

void require_sequences_equal(const std::vector<LedgerEntry>& measured, const std::vector<cost::PlannedCall>& plan) {
  REQUIRE(measured.size() == plan.size());
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const LedgerEntry& m = measured[i];
    const cost::PlannedCall& p = plan[i];
    INFO("rank " << this_rank() << ", call " << i << ": ledger " << m.phase << "/" << m.group << "/"
                 << collective_name(m.op) << " " << m.elements << " elements; plan " << p.phase << "/" << p.group << "/"
                 << collective_name(p.op) << " " << p.elements);
    CHECK(m.phase == p.phase);
    CHECK(m.group == p.group);
    CHECK(m.op == p.op);
    CHECK(m.group_size == p.group_size);
    CHECK(m.elements == p.elements);
    CHECK(m.dtype == p.dtype);
  }
}

// Runs forward, backward and reduce_gradients of the workload's layer on the fixture's mesh.
template <class Layer = LayerUnderTest>
void run_step(ModeFixture& f, const cost::Workload& w) {
  Layer layer(f, w);
  Tensor x = layer.input(), dy = layer.output_grad();  // scatter_full: no communication
  f.ledger.clear();
  {
    PhaseScope phase(f.ledger, "forward");
    layer.forward(x);
  }
  {
    PhaseScope phase(f.ledger, "backward");
    layer.backward(dy);
  }
  {
    PhaseScope phase(f.ledger, "grad-sync");
    reduce_gradients(layer.parameters(), *f.mesh, *f.backend, w.data_parallel_group);
  }
}

}  // namespace

TEST_CASE("plan_step equals the ledger of the real layers on every mode and mesh", "[cost][plan]") {
  for (const ModeCase& c : cases_for_world(world_size())) {
    for (DType dtype : {DType::f64, DType::f32}) {
      for (bool keep : {false, true}) {
        if (keep && c.mode != TpMode::d3) continue;
        DYNAMIC_SECTION(c.label() << " " << dtype_name(dtype) << (keep ? " keep-gathered" : "")) {
          TpOptions options;
          options.keep_gathered_3d = keep;
          ModeFixture f(c, dtype, options);
          for (const char* layer : {"linear", "layernorm", "mlp"}) {
            for (const char* dp : {"", "dp"}) {
              const cost::Workload w = workload_for(c, layer, dtype, keep, dp);
              INFO("layer " << layer << (*dp ? " with the dp gradient sum" : "") << ", B=" << w.rows
                            << " H=" << w.hidden << " F=" << w.ffn_hidden);
              run_step(f, w);
              const std::vector<cost::PlannedCall> plan = cost::plan_step(w);
              require_summaries_equal(f.ledger.summary(), cost::summarize(plan));
              require_sequences_equal(f.ledger.entries(), plan);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("plan_step equals the ledger of Llama's layers on every mode and mesh", "[cost][plan][llama]") {
  // Llama's Linear without a bias, RMSNorm and SwiGLU MLP over a fused gate|up of 2F: the widths
  // and the parameter lists (no bias sums, γ alone) change; the calls follow from them.
  for (const ModeCase& c : cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label() << " llama") {
      ModeFixture f(c, DType::f32);
      for (const char* layer : {"linear", "layernorm", "mlp"}) {
        for (const char* dp : {"", "dp"}) {
          const cost::Workload w = llama_workload_for(c, layer, DType::f32, dp);
          INFO("llama layer " << layer << (*dp ? " with the dp gradient sum" : "") << ", B=" << w.rows
                              << " H=" << w.hidden << " F=" << w.ffn_hidden);
          run_step<LlamaLayerUnderTest>(f, w);
          const std::vector<cost::PlannedCall> plan = cost::plan_step(w);
          require_summaries_equal(f.ledger.summary(), cost::summarize(plan));
          require_sequences_equal(f.ledger.entries(), plan);
        }
      }
    }
  }
}

TEST_CASE("the plan has the collective counts the modes document", "[cost][plan]") {
  // Independent of MPI: spot checks of the algorithms' call counts on meshes larger than the
  // test worlds.
  auto count = [](const std::vector<cost::PlannedCall>& plan, const std::string& phase) {
    return static_cast<int>(std::count_if(plan.begin(), plan.end(), [&](const auto& p) { return p.phase == phase; }));
  };
  cost::Workload w;
  w.layer = "linear";
  w.rows = 64;
  w.hidden = 64;
  w.ffn_hidden = 128;
  SECTION("2D SUMMA: 2q calls forward, 4q backward") {
    w.mode = w.mesh.tp_mode = TpMode::d2;
    w.mesh.world = w.mesh.tp = 16;
    const auto plan = cost::plan_step(w);
    CHECK(count(plan, "forward") == 8);
    CHECK(count(plan, "backward") == 16);
  }
  SECTION("3D: 3 calls forward; 3 (keep) or 5 backward") {
    w.mode = w.mesh.tp_mode = TpMode::d3;
    w.mesh.world = w.mesh.tp = 64;
    CHECK(count(cost::plan_step(w), "forward") == 3);
    CHECK(count(cost::plan_step(w), "backward") == 5);
    w.options.keep_gathered_3d = true;
    CHECK(count(cost::plan_step(w), "backward") == 3);
  }
  SECTION("1D MLP: one all-reduce forward, one backward (Megatron)") {
    w.mode = w.mesh.tp_mode = TpMode::d1;
    w.layer = "mlp";
    w.mesh.world = w.mesh.tp = 8;
    const auto plan = cost::plan_step(w);
    REQUIRE(plan.size() == 2);
    CHECK(plan[0].op == CollectiveOp::all_reduce);
    CHECK(plan[0].elements == w.rows * w.hidden);
    CHECK(plan[1].phase == "backward");
  }
  SECTION("a workload the layers would refuse is refused, naming the value") {
    w.mode = w.mesh.tp_mode = TpMode::d3;
    w.mesh.world = w.mesh.tp = 8;
    w.hidden = 6;  // K must divide by q² = 4
    CHECK_THROWS_WITH(cost::plan_step(w), Catch::Contains("6") && Catch::Contains("divisible by 4"));
    w.hidden = 64;
    w.mode = TpMode::d2;
    CHECK_THROWS_WITH(cost::plan_step(w), Catch::Contains("needs a mesh built for the 2d TP grid"));
  }
}
