#include "cost/offload_cost.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

// One copy between host and GPU while every GPU of the job copies at once: the link's α-β
// (ClusterLink::params: β at its effective bandwidth), each byte sharing the uplink with the other
// `sharing` - 1 GPUs' copies.
double pcie_seconds(double bytes, const ClusterLink& pcie, int sharing) {
  const LinkParams link = pcie.params();
  return link.alpha + bytes * sharing * link.beta;
}

}  // namespace

int gpus_per_host(const StepConfig& c, const Cluster& cluster) { return std::min(c.gpus(), cluster.gpus_per_node); }

void require_offload_hardware(const Cluster& cluster) {
  require(cluster.pcie.has_value(), "cluster '", cluster.name,
          "' gives no links.pcie (the GPUs' PCIe link to the host): ZeRO-Offload's copies cannot be priced on it");
  require(cluster.host.has_value(), "cluster '", cluster.name,
          "' gives no host (the node's CPU memory bandwidth and size): ZeRO-Offload's update cannot be priced on it");
}

OffloadCost offload_cost(const StepConfig& c, double shard, const Cluster& cluster) {
  require_offload_hardware(cluster);
  const ClusterLink& pcie = *cluster.pcie;
  const ClusterHost& host = *cluster.host;
  const double delta = static_cast<double>(dtype_size(c.dtype()));
  const double f32 = static_cast<double>(dtype_size(DType::f32));
  // The state on the host: the optimizer's, with f32 masters at any dtype (DeepSpeed updates its
  // f32 partition; a 16-bit run's K counts them already).
  const double K = c.optimizer_bytes_per_param() + (is_16bit(c.dtype()) ? 0.0 : f32);
  const int on_host = gpus_per_host(c, cluster);
  const int sharing = std::min(host.gpus_per_pcie_uplink, on_host);
  const std::int64_t m = c.microbatches();
  const bool accumulates = c.spec.zero.reduce_per_micro_batch && m > 1;

  OffloadCost o;
  o.gradients_out = pcie_seconds(shard * f32, pcie, sharing);
  o.accumulation = accumulates ? pcie_seconds(shard * delta, pcie, sharing) : 0.0;
  // The job's GPUs on a node update their shards at once, each with its share of the host's
  // bandwidth (a job smaller than a node leaves the rest to it).
  const double per_gpu_bandwidth = host.stream_bandwidth() / on_host;
  o.host_update = shard * (2.0 * f32 + 2.0 * K + delta) / per_gpu_bandwidth;
  o.parameters_in = pcie_seconds(shard * delta, pcie, sharing);
  o.pcie_bytes = shard * (f32 + delta) + (accumulates ? static_cast<double>(m) * shard * delta : 0.0);
  o.host_bytes = shard * (K + f32) + (accumulates ? shard * delta : 0.0);
  return o;
}

}  // namespace mdtp::cost
