#pragma once
// A SimGrid platform for a cluster preset (cost/cluster.hpp): the fabric `mdtp simulate` runs the
// SMPI build on (docs/simulate.md).
//
// Shape: a rail-optimised fat tree, as in a DGX SuperPOD.  Every GPU is a SimGrid host with two
// links of its own:
//   - its NVLink link (the preset's intra-node bandwidth each way) to its node's switch, a router;
//   - its NIC link (the preset's inter-node bandwidth each way) to its rail's leaf switch: GPU i of
//     every node is on rail i mod nics_per_node.
// Rail leaves meet at one spine through uplinks sized for a non-blocking tree (every NIC of the
// rail at full rate).  Links are SPLITDUPLEX: a ring step sends and receives at full rate at once.
// Routing is DijkstraCache: a SimGrid cluster zone cannot give one host two paths (NVLink inside
// the node, its NIC outside).  Its shortest route counts links, and a GPU host is a vertex like a
// router, so a transfer between GPUs of different rails on different nodes ties at four links
// between the spine (NIC, two uplinks, NIC) and a relay through a GPU on the other rail (NVLink,
// NVLink, NIC, NIC): SimGrid takes the relay — NCCL's PXN path, data over NVLink to the GPU on the
// destination's rail and out of its NIC, or the mirror on the receiving node — and the uplinks
// stay idle in every run so far (the links' traffic, link_traffic.hpp, shows it; docs/simulate.md).
//
// Numbers: link bandwidth = the preset's bandwidth x efficiency (the rate a large NCCL transfer
// reaches, the figure the analytic model uses), so that a transfer that shares no link takes the
// model's time; half the preset's α on each of the two links a route crosses (GPU to switch and
// switch to GPU), so a route's latency is the model's α.  Uplinks add no latency.  Every host
// computes at `host_speed` flop/s: the SMPI build charges each kernel's modelled seconds as
// seconds x host_speed flops, so the value only has to match on both sides.
#include <string>
#include <vector>

#include "cost/cluster.hpp"

namespace mdtp::simulate {

inline constexpr double kHostSpeed = 1e9;  // flop/s of every simulated host (see above)

struct Platform {
  std::string xml;                 // the SimGrid platform file (DTD 4.1)
  std::vector<std::string> hosts;  // the GPU hosts in rank order: node-major, GPU-minor
};

// The hosts of GPU `gpu` of node `node`: "n<node>-gpu<gpu>"; its node is the host property "node".
std::string gpu_host_name(int node, int gpu);

// `gpus` GPUs of `cluster`, filling ceil(gpus / gpus_per_node) nodes.  mdtp::Error (one line) for
// gpus < 1 or a cluster with no positive link figures.
Platform rail_optimised_platform(const cost::Cluster& cluster, int gpus);

// The hostfile smpirun reads: one host per line, one rank each.
std::string host_file(const Platform& platform);

// The host names a platform file declares (<host id="...">), in file order: what a user-edited
// platform offers the ranks.
std::vector<std::string> platform_hosts(const std::string& xml);

}  // namespace mdtp::simulate
