#pragma once
// ZeRO-Offload, priced as DeepSpeed runs it (deepspeed/runtime/zero/stage_1_and_2.py with
// offload_optimizer on the CPU and DeepSpeedCPUAdam; read at commit 38327e07f): each rank's
// optimizer state — f32 master weights and Adam's moments, K bytes per parameter of its shard S —
// and the update live in host memory; the GPU keeps the 16-bit parameters and gradients.
//
//   gradients out   at the step's last reduction each bucket's shard is copied to the host's f32
//                   gradient buffer, 4 bytes per element (a non-blocking copy converts on the GPU
//                   before crossing PCIe), on the reduction's stream: it lengthens the chain the
//                   last backward hides (step_model.cpp, data_parallel_cost)
//   accumulation    reducing per micro-batch with m > 1 (ZeRO-2/3), DeepSpeed accumulates the shard
//                   "in CPU via GPU": after the first micro-batch it goes to the host, after each
//                   later one it comes back to be added (S·δ over PCIe per micro-batch)
//   host update     CPU Adam over the shard: the f32 gradient read, the state read and written, and
//                   the masters read again and cast to δ for the copy back (the copy converts on
//                   the host first): 8 + 2K + δ bytes per parameter, at the node's memory bandwidth
//                   shared by the job's GPUs on that node, whose processes all update at once
//                   (memory-bound: a few flops per 30-odd bytes).  K counts f32 masters at any
//                   dtype: the host's f32 partition is the one DeepSpeed updates
//   parameters in   the updated δ-byte values back to the GPU, before ZeRO-1/2's all-gather
//
// PCIe at the cluster's links.pcie, its bandwidth divided among the job's GPUs sharing one uplink
// to the CPU (host.gpus_per_pcie_uplink, at most the job's GPUs on a node).  Host memory per GPU:
// S·(K + 4) (the state and the f32 gradients), and S·δ more for the accumulation.
#include "cost/cluster.hpp"
#include "cost/step_config.hpp"

namespace mdtp::cost {

struct OffloadCost {
  double gradients_out = 0.0;   // s: the last reduction's shard copies to the host
  double accumulation = 0.0;    // s per micro-batch: the shard one way (0 unless reducing per micro-batch, m > 1)
  double host_update = 0.0;     // s: CPU Adam over the shard
  double parameters_in = 0.0;   // s: the updated 16-bit shard back to the GPU
  double pcie_bytes = 0.0;      // per step, both directions
  double host_bytes = 0.0;      // host memory one GPU's shard takes
  double after_backward() const { return host_update + parameters_in; }
};

// The job's GPUs on one node, which share its host's memory and bandwidth: min(gpus, gpus_per_node).
int gpus_per_host(const StepConfig& config, const Cluster& cluster);

// mdtp::Error naming the cluster and the missing field when it gives no links.pcie or no host.
void require_offload_hardware(const Cluster& cluster);
// require_offload_hardware, then the costs.  `shard`: the parameter elements this rank updates
// (the stage's parameters / dp).
OffloadCost offload_cost(const StepConfig& config, double shard, const Cluster& cluster);

}  // namespace mdtp::cost
