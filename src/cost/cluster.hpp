#pragma once
// Cluster: a machine described as data (data/clusters/NAME.json), for the whole-step model
// (step_model.hpp) and `mdtp plan`.  What the model needs of it, and nothing else:
//
//   gpus_per_node                    placement: TP inside a node when it fits, PP/DP across
//   gpu.peak_flops {dtype: flop/s}   dense tensor-core peak per data type
//   gpu.gemm_efficiency              the fraction of that peak the best-shaped large GEMM reaches in
//                                    a microbenchmark (kernel_time.hpp adds tile and wave losses)
//   gpu.gemm_reference_shape (opt.)  [m, n, k] of that best shape: the tile model's main-loop rate
//                                    is set so that this shape, its waves' output writes included,
//                                    runs at gemm_efficiency; absent: gemm_efficiency is the main
//                                    loop's own rate
//   gpu.synchronous_pace (optional)  the fraction of that sustained tensor-core rate the slowest GPU
//                                    of a fully loaded node keeps: a synchronous step waits for it
//                                    at every collective (GEMM main loops and the attention kernel;
//                                    streaming kernels are bound by HBM, not the SM clock); absent: 1
//   gpu.rate_sigma (optional)        the relative standard deviation of that rate across GPUs: a job
//                                    of n GPUs waits for the slowest of n, slower the larger n
//                                    (straggler_pace.hpp); absent: 0, synchronous_pace for any job
//   gpu.sm_count (optional)          streaming multiprocessors: the GEMM's waves; absent (0): the
//                                    roofline alone at gemm_efficiency
//   gpu.kernel_overhead (optional)   seconds each kernel adds beyond its work (launch, ramp, tail)
//   gpu.attention_efficiency (opt.)  the fraction of the peak a streaming (FlashAttention-style)
//                                    attention kernel reaches on the work it does, from the kernel's
//                                    published benchmarks; absent: its products at the GEMM model's
//                                    tiles and waves
//   gpu.attention_backward_efficiency (opt.)  the same for its backward pass (five products, the
//                                    scores recomputed); absent: the forward's rate
//   gpu.attention_reference_seq (opt.)  the sequence length those rates were measured at, counted as
//                                    the benchmarks count a causal kernel's work (half the scores);
//                                    other lengths follow the kernel's tile curve (attention_core.hpp);
//                                    absent: the rates are on the work the kernel does, at any length
//   gpu.attention_tile_overhead (opt.)  the kernel's fixed cost per row of 128 queries (loading Q,
//                                    the softmax's final rescale, writing O), in 128 x 128 score
//                                    tiles, from the kernel's published rate-against-length curve;
//                                    absent: 0
//   gpu.hbm_bytes, hbm_bandwidth     capacity and the data-sheet bandwidth (B, B/s)
//   gpu.memory_efficiency            the fraction of hbm_bandwidth streaming kernels reach
//   gpu.reserved_bytes               what the framework holds besides the model (CUDA context,
//                                    communicator buffers, allocator slack)
//   links.intra_node, links.inter_node (links.pcie optional)
//                                    α (s), unidirectional bandwidth per GPU (B/s) and the
//                                    fraction of it a large collective reaches: β = 1/(bw·eff)
//   links.*.channel_bandwidth (opt.) NCCL's bandwidth per channel on that link (its topology
//                                    search's speed): with gpu.sm_count, how many SMs an NCCL
//                                    collective holds while compute runs beside it
//                                    (collective_sms.hpp); absent: none counted
//   links.intra_node.nvls (optional) the switch's NVLink SHARP: its all-reduce's α and algorithm
//                                    bandwidth (time_model.hpp NvlsParams), with their source
//   host (optional)                  the node's CPU memory: bandwidth (B/s, the node's sockets
//                                    together), the fraction a streaming update reaches, capacity,
//                                    and the GPUs whose copies share one PCIe uplink to it; with
//                                    links.pcie what ZeRO-Offload's host update and copies need
//                                    (offload_cost.hpp)
//   library                          "nccl" | "mpich": whose algorithms run the collectives
//   source                           where the figures come from (every file must say)
//
// The JSON format is in docs/performance-model.md ("Adding a cluster").  Loading refuses, in one
// line naming the file and the field, a missing field, a wrong type or a value out of range.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "cost/calibration.hpp"
#include "cost/time_model.hpp"

namespace mdtp::cost {

struct ClusterLink {
  std::string kind;         // "nvswitch", "infiniband", "pcie", ... (reported only)
  double alpha = 0.0;       // s per message
  double bandwidth = 0.0;   // B/s, unidirectional, per GPU
  double efficiency = 1.0;  // fraction of `bandwidth` a large collective reaches
  // NCCL's bandwidth per channel on this link (collective_sms.hpp); 0: not given, no SMs counted.
  double channel_bandwidth = 0.0;
  std::string source;
  LinkParams params() const { return {alpha, 1.0 / (bandwidth * efficiency)}; }
};

// The host side of a node, for ZeRO-Offload: its CPUs' memory and how the GPUs reach it.
struct ClusterHost {
  double memory_bandwidth = 0.0;   // B/s, every socket's memory channels together (the data sheet's peak)
  double memory_efficiency = 1.0;  // the fraction of it a streaming loop over the whole node reaches
  double memory_bytes = 0.0;       // the node's system memory
  int gpus_per_pcie_uplink = 1;    // GPUs whose host copies share one PCIe link to the CPU
  std::string source;
  double stream_bandwidth() const { return memory_bandwidth * memory_efficiency; }
};

struct ClusterNvls {
  NvlsParams params;
  std::string source;
};

// The [m, k]·[k, n] shape a GEMM microbenchmark measured its rate at.
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct Cluster {
  std::string name, description, source;
  std::string path;  // the file it was read from ("" when built in memory)
  int gpus_per_node = 1;
  // Compute NICs per node, each with the inter-node link's bandwidth (rail-optimised DGX: one per
  // GPU); a group with k GPUs per node spreads over min(k, nics_per_node) (TimeModel).  1 if absent.
  int nics_per_node = 1;
  std::string gpu_name;
  std::map<DType, double> peak_flops;  // flop/s
  double gemm_efficiency = 1.0;
  std::optional<GemmShape> gemm_reference_shape;  // absent: gemm_efficiency is the main loop's rate
  // The slowest GPU's share of the rate above when every GPU of the node runs (header comment).
  double synchronous_pace = 1.0;
  // The relative standard deviation of the per-GPU sustained rate across GPUs (straggler_pace.hpp):
  // a job of more GPUs than a node waits for a slower slowest one (for_job).  0: every job of two or
  // more GPUs at synchronous_pace.
  double rate_sigma = 0.0;
  int sm_count = 0;              // 0: no tile/wave model (calibrated or host clusters)
  double kernel_overhead = 0.0;  // s per kernel
  double attention_efficiency = 0.0;  // 0: not given (the GEMM model's rate)
  double attention_backward_efficiency = 0.0;  // 0: not given (the forward's rate)
  std::int64_t attention_reference_seq = 0;    // 0: the rates are on the work done (header comment)
  double attention_tile_overhead = 0.0;        // tiles of fixed cost per row of 128 queries
  double hbm_bytes = 0.0;
  double hbm_bandwidth = 0.0;  // B/s
  double memory_efficiency = 1.0;
  double reserved_bytes = 0.0;
  ClusterLink intra_node, inter_node;
  std::optional<ClusterLink> pcie;
  std::optional<ClusterNvls> nvls;  // absent: no NVLink SHARP (A100, PCIe)
  std::optional<ClusterHost> host;  // absent: ZeRO-Offload cannot be priced on it
  CollectiveLibrary library = CollectiveLibrary::nccl;
  // The all-reduce algorithms NCCL may pick from (`--nccl-algo`, NCCL_ALGO); not read from the
  // file: a choice of the run.
  NcclAlgorithms nccl_algorithms;

  double peak(DType dtype) const;  // mdtp::Error naming the dtype when the file gives none
  // The microbenchmark's rate, one GPU alone (kernel_time.cpp paces it by synchronous_pace).
  double gemm_rate(DType dtype) const { return peak(dtype) * gemm_efficiency; }
  double stream_bandwidth() const { return hbm_bandwidth * memory_efficiency; }
};

// Reads and validates a cluster file; mdtp::Error "cluster file F: field X ..." on any problem.
Cluster load_cluster(const std::string& path);
// The cluster as a job of `gpus` GPUs runs on it: a job of one GPU waits for no other, so its
// tensor cores keep the microbenchmark's alone rate (synchronous_pace 1); a larger one runs at the
// pace of the slowest GPU it synchronises with: the cluster's synchronous_pace (the slowest of a
// loaded node) scaled, where the file gives rate_sigma, to the slowest of `gpus`
// (slowest_gpu_pace).
Cluster for_job(Cluster cluster, int gpus);
// The cluster at its data sheet: tensor cores at their peak (no microbenchmark efficiency, no
// synchronous pace, no tiles or waves: each GEMM its roofline; the attention kernel at the peak on the
// work it does), HBM at its bandwidth, every link at its line rate with no latency (NVLink SHARP at the
// NVLink's rate), no per-kernel cost, host memory at its channels' rate.  The step model on it gives
// the fastest a configuration can run on that hardware with the same schedule, overlaps and kernels:
// a measured run faster than that did not run the configuration it is modelled as (`mdtp plan
// --validate`, "of bound").
Cluster at_data_sheet(Cluster cluster);
// Parses cluster JSON text; `where` names it in errors.
Cluster parse_cluster(const std::string& json_text, const std::string& where);

// A path (anything with a '/' or ending in .json) is read as given; a NAME is looked up as
// NAME.json in data/clusters/ the way the corpus is found (io/token_data.cpp): $MDTP_DATA_DIR,
// beside the program (data/ or share/mdtp/), the source tree, the install prefix, the working
// directory.  mdtp::Error listing where it looked when nothing is found.
std::string find_cluster(const std::string& name_or_path);

// The α-β time model of the cluster: its links per class, its library's algorithms, and its
// sustained GEMM rate per dtype.
TimeModel cluster_time_model(const Cluster& cluster);

// A cluster from what `mdtp calibrate` measured (its link α-β, already effective, so efficiency
// 1; its GEMM rates, so gemm_efficiency = measured / declared peak) plus what no measurement on
// one node gives: the declared peaks, the memory figures and the node size.
struct DeclaredDevice {
  std::string name = "calibrated";
  int gpus_per_node = 1;
  std::map<DType, double> peak_flops;
  double hbm_bytes = 0.0, hbm_bandwidth = 0.0, memory_efficiency = 1.0, reserved_bytes = 0.0;
  CollectiveLibrary library = CollectiveLibrary::mpich;
};
Cluster cluster_from_calibration(const Calibration& calibration, const DeclaredDevice& declared, DType gemm_dtype);

// The JSON of a cluster (the format load_cluster reads).
std::string cluster_json(const Cluster& cluster);

}  // namespace mdtp::cost
