// What overlapping a collective with compute costs and saves, from first principles: the SMs an
// NCCL collective holds (its channels, from the group's placement and NCCL's per-channel speed) and
// those Transformer Engine's userbuffers hold, the compute they take, and Megatron's interleaved
// schedule overlapping the data-parallel collectives chunk by chunk.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "cost/chunked_overlap.hpp"
#include "cost/collective_sms.hpp"
#include "cost/layer_costs.hpp"
#include "cost/step_model.hpp"
#include "dgx_a100.hpp"

using namespace mdtp;
using namespace mdtp::cost;
using mdtp::testing::dgx_a100;

namespace {

const Cluster& dgx_h100() {
  static const Cluster c = load_cluster(find_cluster("dgx-h100"));
  return c;
}

GroupSpan across_nodes(int gpus_per_node) { return {LinkClass::inter_node, gpus_per_node, gpus_per_node}; }

// A bf16 step of `model` under ZeRO-1 with the parameter gather overlapped, micro-batch 1.
StepConfig zero1_step(const ModelShape& model, std::int64_t batch, TpMode mode, int tp, int pp, int dp) {
  StepConfig c;
  c.spec.precision = precision_for(DType::bf16);
  c.spec.model = model;
  c.spec.global_batch = batch;
  c.spec.layout.mode = mode;
  c.spec.layout.tp = tp;
  c.spec.layout.pp = pp;
  c.spec.layout.dp = dp;
  c.spec.zero.stage = 1;
  c.overlap.param_gather = true;
  c.set_micro_batch(1);
  return c;
}

}  // namespace

TEST_CASE("an NCCL collective holds two SMs per channel its search opens for the group's bandwidth, at most 32",
          "[cost][overlap]") {
  // DGX H100: NDR at 50 GB/s × 0.9 per NIC, one NIC per GPU; NVLink 450 GB/s × 0.8; NCCL's channels
  // carry 48 GB/s across nodes, 60 GB/s inside one (its sm90 speed tables).
  const TimeModel h100 = cluster_time_model(dgx_h100());
  // One GPU per node (a tp 8 job's data-parallel ring): one NIC, 45 GB/s, one channel, doubled.
  CHECK(nccl_channel_sms(across_nodes(1), h100) == 2);
  // Four GPUs per node: four NICs, 180 GB/s, ⌈180/48⌉ = 4 channels, doubled.
  CHECK(nccl_channel_sms(across_nodes(4), h100) == 8);
  // Eight: the node's eight NICs, 360 GB/s (the NVLink feeding them carries as much), 8 channels.
  CHECK(nccl_channel_sms(across_nodes(8), h100) == 16);
  // Inside a node: NVLink's 360 GB/s in channels of 60 GB/s: 6, doubled.
  CHECK(nccl_channel_sms(GroupSpan{}, h100) == 12);
  // DGX A100: HDR at 25 GB/s × 0.9 in channels of 24 GB/s; NVLink 300 GB/s × 0.8 in channels of 40.
  const TimeModel a100 = cluster_time_model(dgx_a100());
  CHECK(nccl_channel_sms(across_nodes(1), a100) == 2);
  CHECK(nccl_channel_sms(across_nodes(8), a100) == 2 * 8);  // 180 GB/s: ⌈7.5⌉ channels
  CHECK(nccl_channel_sms(GroupSpan{}, a100) == 12);
  // At most NCCL's 32 channels, however thin each is.
  TimeModel thin = h100;
  thin.channel_bandwidth[LinkClass::intra_node] = 1e9;
  CHECK(nccl_channel_sms(GroupSpan{}, thin) == kNcclMaxChannels);
  // A cluster that gives no channel bandwidth (a calibrated one) counts none.
  TimeModel none = h100;
  none.channel_bandwidth.clear();
  CHECK(nccl_channel_sms(across_nodes(8), none) == 0);
  // The data sheet's bound takes nothing from compute: its links give no channel bandwidth.
  CHECK(cluster_time_model(at_data_sheet(dgx_h100())).channel_bandwidth.empty());
}

TEST_CASE("SMs held beside compute cost it their share of the SMs for as long as they run", "[cost][overlap]") {
  CHECK(sm_held_seconds(1.0, 16, 132) == Approx(16.0 / 132.0).epsilon(1e-15));
  CHECK(sm_held_seconds(0.25, 12, 108) == Approx(0.25 * 12.0 / 108.0).epsilon(1e-15));
  CHECK(sm_held_seconds(1.0, 16, 0) == 0.0);  // no SM count: no wave model, nothing counted
  CHECK(sm_held_seconds(1.0, 0, 132) == 0.0);
  CHECK(sm_held_seconds(-1.0, 16, 132) == 0.0);
  CHECK(sm_held_seconds(1.0, 200, 132) == Approx(1.0));  // never more than all of them
}

TEST_CASE("Transformer Engine's userbuffers run 1D-SP's reduce-scatters and the re-gather of X on SMs, the other "
          "all-gathers on copy engines",
          "[cost][overlap]") {
  // One GPT block on tp 8: attention and MLP each gather X forward (qkv, fc1: ring exchange, copy
  // engines) and reduce-scatter Y (proj, fc2: "pipeline", 16 SMs); backward each gathers dY
  // (proj, fc2 dgrad: ring exchange), reduce-scatters dX and gathers X again for dW (qkv, fc1:
  // "bulk", 16 SMs).  All six are rows × hidden, so the shares are 1/2 and 2/3.
  const ModelShape model{8, 4096, 32, 2048, 51200};
  const LayerCosts sp = layer_costs(model, TpMode::d1_sp, 8, 1, 1, DType::bf16, dgx_h100());
  REQUIRE(sp.block.forward.comm_seconds > 0.0);
  CHECK(sp.block.forward.comm_on_sms_seconds == Approx(sp.block.forward.comm_seconds / 2).epsilon(1e-12));
  CHECK(sp.block.backward_input.comm_on_sms_seconds ==
        Approx(sp.block.backward_input.comm_seconds * 2 / 3).epsilon(1e-12));
  // Plain 1D's all-reduces are NCCL's, not the userbuffers': none counted here.
  const LayerCosts plain = layer_costs(model, TpMode::d1, 8, 1, 1, DType::bf16, dgx_h100());
  REQUIRE(plain.block.forward.comm_seconds > 0.0);
  CHECK(plain.block.forward.comm_on_sms_seconds == 0.0);
  CHECK(plain.block.backward_input.comm_on_sms_seconds == 0.0);
}

TEST_CASE("Megatron's interleaved schedule reduces the gradients chunk by chunk", "[cost][overlap]") {
  // One chunk: the buckets go under the last micro-batch's backward, the reduction beyond it left.
  CHECK(chunked_exposure(3.0, 1.0, 1, 4) == Approx(2.0));
  CHECK(chunked_exposure(0.5, 1.0, 1, 4) == Approx(-0.5));
  // Two chunks, groups of 4 micro-batches: chunk 1's half is launched after its last backward pass,
  // with chunk 0's 4 passes (of P/2 each) still to run; chunk 0's half after the stage's last pass.
  // C = 3, P = 1: max(k = 0: 1.5, k = 1: 3 − 2) = 1.5, the last chunk's share.
  CHECK(chunked_exposure(3.0, 1.0, 2, 4) == Approx(1.5));
  // A reduction too long for the window queues behind: C = 12, P = 1: max(6, 12 − 2) = 10.
  CHECK(chunked_exposure(12.0, 1.0, 2, 4) == Approx(10.0));
  // Four chunks of groups of 8: chunk k's reduction has 8k passes of P/4 behind it.
  // C = 2, P = 1: max(0.5, 1 − 2, 1.5 − 4, 2 − 6) = 0.5.
  CHECK(chunked_exposure(2.0, 1.0, 4, 8) == Approx(0.5));
  // The last chunk's share is left however short the reduction: where one chunk would hide it all.
  CHECK(chunked_exposure(0.5, 1.0, 2, 4) == Approx(0.25));
  CHECK_THROWS(chunked_exposure(1.0, 1.0, 0, 4));

  // In the step: a reduction several backward passes long (a 16-layer, 4096-wide model's f32
  // gradients over 8 nodes, one NIC per GPU, against passes of 512 tokens) hides more under an
  // interleaved pipeline (v 2, groups of pp = 4: chunk 1's half has 2 micro-batches' passes behind
  // it) than under 1F1B, the bytes unchanged.
  const StepConfig c = zero1_step(ModelShape{16, 4096, 32, 512, 51200}, 64, TpMode::d1_sp, 8, 4, 8);
  StepConfig interleaved = c;
  interleaved.spec.layout.schedule = ScheduleKind::interleaved;
  interleaved.spec.layout.chunks = 2;
  const StepEstimate one = estimate_step(c, dgx_h100()), two = estimate_step(interleaved, dgx_h100());
  CHECK(two.time.dp_comm < one.time.dp_comm);
  CHECK(two.traffic.dp_bytes == one.traffic.dp_bytes);
}

TEST_CASE("overlapped data-parallel collectives cost the SMs their channels hold: one GPU per node 2, eight 16",
          "[cost][overlap]") {
  // A small model (hidden 2048, 24 layers) on 16 H100s, micro-batch 1, 4 micro-batches: pure data
  // parallelism puts 8 GPUs of each ring on a node (16 SMs), tp 8 one (2 SMs).  The channel
  // bandwidth removed, the same steps run the same collectives but take nothing from compute: the
  // difference is the SMs' share of the time the collectives ran beside it.
  Cluster quiet = dgx_h100();
  quiet.intra_node.channel_bandwidth = quiet.inter_node.channel_bandwidth = 0.0;
  for (int tp : {1, 8}) {
    const StepConfig c =
        zero1_step(ModelShape{24, 2048, 16, 4096, 51200}, 64 / tp, tp > 1 ? TpMode::d1_sp : TpMode::none, tp, 1, 16 / tp);
    INFO("tp " << tp);
    const StepEstimate held = estimate_step(c, dgx_h100()), free = estimate_step(c, quiet);
    const int sms = nccl_channel_sms(held.placement.dp, cluster_time_model(dgx_h100()));
    CHECK(sms == (tp == 1 ? 16 : 2));
    CHECK(held.time.dp_comm > free.time.dp_comm);
    // Never more than the SMs' share of every byte's time: the collectives ran beside compute at most.
    CHECK(held.time.dp_comm - free.time.dp_comm <= held.time.compute * sms / 132.0);
    CHECK(held.time.compute == Approx(free.time.compute).epsilon(1e-12));
  }
}

TEST_CASE("overlapped pipeline sends leave the steady state but stay on the pipeline's critical path",
          "[cost][overlap]") {
  // A 16-layer model on 4 stages of one H100 node each (the sends cross nodes), interleaved v 2.
  // Blocking sends cost every micro-batch 2v of them and the fill and drain 2(p − 1); overlapped
  // ones cost the micro-batches nothing, and the bubble the 2(p·v − 1) crossings of the first
  // forward and the last backward (pipeline_bubble.hpp): 2p(v − 1) more than the blocking bubble's.
  StepConfig c = zero1_step(ModelShape{16, 4096, 32, 2048, 51200}, 64, TpMode::d1_sp, 8, 4, 2);
  c.spec.layout.schedule = ScheduleKind::interleaved;
  c.spec.layout.chunks = 2;
  StepConfig overlapped = c;
  overlapped.overlap.pp_p2p = true;
  c.overlap.pp_p2p = false;
  const StepEstimate blocking = estimate_step(c, dgx_h100()), hidden = estimate_step(overlapped, dgx_h100());
  REQUIRE(blocking.placement.pp.link == LinkClass::inter_node);
  const int p = 4, v = 2;
  const double m = static_cast<double>(blocking.microbatches);
  // The sends' share of the blocking step's pipeline time, one by one (the rest, the tied
  // embedding's gradient sum between the first and last stage, is the same in both).
  const double hop = (blocking.time.pp_comm - hidden.time.pp_comm) / (2 * v * m);
  CHECK(hop > 0);
  CHECK(hidden.time.bubble - blocking.time.bubble == Approx(2 * p * (v - 1) * hop).epsilon(1e-9));
  CHECK(hidden.traffic.pp_bytes == blocking.traffic.pp_bytes);
  CHECK(hidden.step_seconds < blocking.step_seconds);
}
