// ZeRO-Offload in the step model (src/cost/offload_cost.hpp), from the data sheets' figures: the
// optimizer state leaves the GPU for the host; CPU Adam streams its bytes at the node's memory
// bandwidth shared by its GPUs; the shard's gradients cross PCIe in f32 and the new values come back
// in 16 bits; a cluster that does not describe its host cannot price it.
#include <catch2/catch.hpp>

#include "cost/layer_costs.hpp"
#include "cost/offload_cost.hpp"
#include "cost/step_model.hpp"
#include "dgx_a100.hpp"
#include "zero_step_config.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;
using mdtp::testing::zero_step_config;

namespace {

// zero_step_config in bf16 with f32 gradients, the step model's usual case.
StepConfig offload_config(int zero, std::int64_t micro_batches) {
  return zero_step_config(zero, micro_batches, DType::bf16);
}

StepEstimate priced(const StepConfig& c, const Cluster& cluster) {
  return estimate_step(c, layer_costs(c, cluster), cluster);
}

// The data sheets' figures the expectations are written from (data/clusters/dgx-a100.json): two
// EPYC 7742 sockets of 8 DDR4-3200 channels, 409.6 GB/s at 75 %, shared by 8 GPUs; PCIe Gen4 x16,
// 32 GB/s at 80 %, 5 us per copy.
constexpr double kHostPerGpu = 409.6e9 * 0.75 / 8;
constexpr double kPcie = 32e9 * 0.8;
constexpr double kPcieAlpha = 5e-6;

}  // namespace

TEST_CASE("ZeRO-Offload: the optimizer state in host memory, the update at the host's bandwidth, the copies on PCIe",
          "[cost][step][zero][offload]") {
  const Cluster& cluster = dgx_a100();
  REQUIRE(cluster.host);
  REQUIRE(cluster.host->stream_bandwidth() / cluster.gpus_per_node == Approx(kHostPerGpu));
  for (int zero : {1, 2, 3}) {
    INFO("zero " << zero);
    StepConfig resident = offload_config(zero, 4);
    resident.overlap.dp_gradients = false;  // every copy shows in the data-parallel time
    StepConfig offloaded = resident;
    offloaded.spec.zero.offload = true;
    const StepEstimate r = priced(resident, cluster), o = priced(offloaded, cluster);
    const double shard = r.memory.parameter_elements / 4;  // the stage's parameters over dp 4
    const double K = 12.0;                                  // AdamW under bf16: f32 master, m, v
    // The state leaves the GPU for the host, with the host's f32 gradient buffer beside it.
    CHECK(r.memory.optimizer == Approx(shard * K));
    CHECK(o.memory.optimizer == 0.0);
    CHECK(o.memory.host == Approx(shard * (K + 4.0)));
    CHECK(r.memory.host == 0.0);
    CHECK(o.memory.total() == Approx(r.memory.total() - shard * K));
    CHECK(o.host_memory_capacity == 2e12);
    CHECK(o.fits);
    // CPU Adam: the f32 gradient read, master, m and v read and written, the masters read again and
    // cast to bf16 (34 bytes per parameter); then the bf16 values back over PCIe.  No Megatron
    // buffer passes: the step is DeepSpeed's.
    const double update = shard * (4.0 + 2.0 * K + 4.0 + 2.0) / kHostPerGpu;
    const double back = kPcieAlpha + shard * 2.0 / kPcie;
    CHECK(o.time.optimizer == Approx(update + back).epsilon(1e-12));
    // The shard's gradients go out in f32 after the reduction, which waits after the backward here.
    CHECK(o.time.dp_comm - r.time.dp_comm == Approx(kPcieAlpha + shard * 4.0 / kPcie).epsilon(1e-9));
    CHECK(o.traffic.pcie_bytes == Approx(shard * (4.0 + 2.0)));
    CHECK(o.time.compute == r.time.compute);
    CHECK(o.step_seconds > r.step_seconds);
    CHECK(describe(offloaded).find(" offload") != std::string::npos);
  }
}

TEST_CASE("ZeRO-Offload: the update shrinks with the shard, and the gradients' copy hides under the backward",
          "[cost][step][zero][offload]") {
  const Cluster& cluster = dgx_a100();
  StepConfig four = offload_config(1, 4);
  four.spec.zero.offload = true;
  four.spec.global_batch = 4 * 16 * 4;  // 16 sequences per micro-batch: a backward longer than the copies
  StepConfig eight = four;              // the same model over dp 8: half the shard per GPU
  eight.spec.layout.tp = 1;
  eight.spec.layout.dp = 8;
  eight.spec.global_batch = 4 * 16 * 8;
  const StepEstimate a = priced(four, cluster), b = priced(eight, cluster);
  // tp 1 holds twice tp 2's elements per rank, spread over twice the ranks: equal shards.
  CHECK(a.memory.parameter_elements / 4 == Approx(b.memory.parameter_elements / 8).epsilon(0.01));
  CHECK(b.time.optimizer == Approx(a.time.optimizer).epsilon(0.01));
  // With the reduction under the last backward (the default), a shard this small crosses PCIe
  // while the backward runs: nothing more is exposed than without offload.
  StepConfig resident = four;
  resident.spec.zero.offload = false;
  CHECK(a.time.dp_comm == Approx(priced(resident, cluster).time.dp_comm).epsilon(1e-12));
}

TEST_CASE("ZeRO-Offload on one GPU: nothing reduced, the gradients still cross PCIe under the backward",
          "[cost][step][zero][offload]") {
  const Cluster& cluster = dgx_a100();
  StepConfig c = offload_config(1, 4);
  c.spec.layout.tp = 1;
  c.spec.layout.dp = 1;
  c.spec.global_batch = 4 * 2;
  c.spec.zero.offload = true;
  StepConfig waits = c;
  waits.overlap.dp_gradients = false;
  const StepEstimate hidden = priced(c, cluster), after = priced(waits, cluster);
  const double shard = hidden.memory.parameter_elements;  // dp 1: the whole model
  const double out = kPcieAlpha + shard * 4.0 / kPcie;
  CHECK(after.time.dp_comm == Approx(out).epsilon(1e-12));  // after the backward: all of it
  CHECK(hidden.time.dp_comm < out);                         // under the last backward: what is left of it
  CHECK(hidden.time.dp_comm >= 0.0);
  CHECK(hidden.traffic.dp_bytes == 0.0);
  // One GPU on the node: the host's whole bandwidth is its own.
  CHECK(hidden.time.optimizer ==
        Approx(shard * 34.0 / (8 * kHostPerGpu) + kPcieAlpha + shard * 2.0 / kPcie).epsilon(1e-12));
}

TEST_CASE("ZeRO-Offload reducing per micro-batch accumulates through the host: the shard over PCIe each micro-batch",
          "[cost][step][zero][offload]") {
  const Cluster& cluster = dgx_a100();
  for (std::int64_t m : {1, 4}) {
    INFO("micro-batches " << m);
    StepConfig resident = offload_config(2, m);
    resident.spec.zero.reduce_per_micro_batch = true;
    resident.overlap.dp_gradients = false;
    StepConfig offloaded = resident;
    offloaded.spec.zero.offload = true;
    const StepEstimate r = priced(resident, cluster), o = priced(offloaded, cluster);
    const double shard = r.memory.parameter_elements / 4;
    const double accumulation = m > 1 ? kPcieAlpha + shard * 2.0 / kPcie : 0.0;  // bf16 each micro-batch
    const double out = kPcieAlpha + shard * 4.0 / kPcie;                          // f32 once
    CHECK(o.time.dp_comm - r.time.dp_comm == Approx(static_cast<double>(m) * accumulation + out).epsilon(1e-9));
    CHECK(o.traffic.pcie_bytes == Approx(shard * 6.0 + (m > 1 ? static_cast<double>(m) * shard * 2.0 : 0.0)));
    CHECK(o.memory.host == Approx(shard * 16.0 + (m > 1 ? shard * 2.0 : 0.0)));
  }
}

TEST_CASE("ZeRO-Offload: PCIe shared by two GPUs halves each one's copies; a host too small does not fit",
          "[cost][step][zero][offload]") {
  Cluster shared = dgx_a100();
  shared.host->gpus_per_pcie_uplink = 2;
  StepConfig c = offload_config(1, 4);
  c.spec.zero.offload = true;
  const StepEstimate own = priced(c, dgx_a100()), half = priced(c, shared);
  const double shard = own.memory.parameter_elements / 4;
  CHECK(half.time.optimizer - own.time.optimizer == Approx(shard * 2.0 / kPcie).epsilon(1e-9));
  // A job of one GPU has the uplink to itself.
  StepConfig alone = c;
  alone.spec.layout.tp = 1;
  alone.spec.layout.dp = 1;
  alone.spec.global_batch = 4 * 2;
  CHECK(priced(alone, shared).time.optimizer == Approx(priced(alone, dgx_a100()).time.optimizer).epsilon(1e-12));
  Cluster small_host = dgx_a100();
  small_host.host->memory_bytes = own.memory.host * small_host.gpus_per_node * 0.99;
  const StepEstimate too_big = priced(c, small_host);
  CHECK_FALSE(too_big.fits);
  CHECK(too_big.memory.total() <= small_host.hbm_bytes);  // the GPU's side fits; the host's does not
}

TEST_CASE("ZeRO-Offload in f32: the host's f32 partition is the master copy, 4 bytes beside Adam's moments",
          "[cost][step][zero][offload]") {
  StepConfig c = zero_step_config(1, 4, DType::f32);
  c.spec.zero.offload = true;
  const StepEstimate e = priced(c, dgx_a100());
  const double shard = e.memory.parameter_elements / 4;
  CHECK(c.optimizer_bytes_per_param() == 8.0);            // resident: m and v, the values are the masters
  CHECK(e.memory.host == Approx(shard * (8.0 + 4.0 + 4.0)));  // offloaded: + the masters, + the f32 gradients
  CHECK(e.time.optimizer ==
        Approx(shard * (4.0 + 2.0 * 12.0 + 4.0 + 4.0) / kHostPerGpu + kPcieAlpha + shard * 4.0 / kPcie).epsilon(1e-12));
}

TEST_CASE("ZeRO-Offload needs the host described and DeepSpeed's kernels", "[cost][step][zero][offload]") {
  StepConfig c = offload_config(1, 4);
  c.spec.zero.offload = true;
  Cluster no_host = dgx_a100();
  no_host.host.reset();
  CHECK_THROWS_WITH(priced(c, no_host), Catch::Contains("gives no host"));
  Cluster no_pcie = dgx_a100();
  no_pcie.pcie.reset();
  CHECK_THROWS_WITH(priced(c, no_pcie), Catch::Contains("gives no links.pcie"));
  c.engine_kernels = true;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("zero.offload with --engine-kernels"));
  c.engine_kernels = false;
  c.spec.zero.stage = 0;
  CHECK_THROWS_WITH(validate(c), Catch::Contains("zero.offload needs ZeRO stage 1, 2 or 3"));
}
