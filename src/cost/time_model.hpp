#pragma once
// The α-β time model (docs/theory.md §5).  A call on n ranks moving S logical bytes costs what the
// algorithm the library picks at that size costs (L = ⌈log₂ n⌉):
//
//   broadcast   binomial tree                     L·(α + S·β)
//               scatter + recursive-doubling AG   2L·α + 2(n−1)/n·S·β      (medium, n a power of 2)
//               scatter + ring all-gather         (L + n−1)·α + 2(n−1)/n·S·β
//   reduce      binomial tree                     L·(α + S·β)
//               Rabenseifner (RS + gather)        2L·α + 2(n−1)/n·S·β
//   all-reduce  recursive doubling                (⌊log₂ n⌋ + 2·[n not a power of 2])·(α + S·β)
//               ring                              2(n−1)·α + 2(n−1)/n·S·β
//               Rabenseifner (RS + AG)            2L·α + 2(n−1)/n·S·β
//   all-gather  recursive doubling | Bruck        L·α + (n−1)/n·S·β
//               ring                              (n−1)·α + (n−1)/n·S·β
//   reduce-scatter  recursive halving             L·α + (n−1)/n·S·β
//               pairwise                          (n−1)·α + (n−1)/n·S·β
//   send, recv  α + S·β;   barrier (dissemination) L·α;   any call on 1 rank: 0.
//
// Selection follows MPICH's classic rules (used by its blocking and its non-blocking "auto"
// schedules alike; mdtp's MPI communicator issues only MPI_I* calls), with MPICH's CVAR
// defaults in AlgorithmSelection.  The reduction arithmetic (γ) is not modelled.  Overlap is
// not modelled either: a step's predicted time is the sum of its calls, an upper bound for the
// overlapped SUMMA and 3D schedules.
//
// With library = nccl (GPU clusters) the algorithms are NCCL's instead: rings everywhere —
//   all-reduce  ring 2(n−1)·α + 2(n−1)/n·S·β, or the double binary tree 2L·α + 2·S·β, or on an
//               NVSwitch with NVLink SHARP (TimeModel::nvls) NVLS inside a node α_s + S/B_s and
//               NVLS-tree across nodes, whichever is quickest (NCCL's tuner picks by the same kind
//               of α-β estimate; the allowed set is NCCL_ALGO's, NcclAlgorithms);
//   all-gather, reduce-scatter  ring (n−1)·α + (n−1)/n·S·β;
//   broadcast, reduce  pipelined chain (n−1)·α + S·β;   send, recv  α + S·β.
//
// α and β come per link class (Topology::link_class of the call's group); a Calibration's fit
// for the op replaces the formula, its link parameters replace the defaults.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cost/calibration.hpp"
#include "cost/cost_model.hpp"

namespace mdtp::cost {

enum class CollectiveAlgorithm {
  none,  // one rank: nothing moves
  binomial_tree,
  scatter_doubling_allgather,
  scatter_ring_allgather,
  recursive_doubling,            // all-reduce: the whole buffer exchanged in each of log n steps
  recursive_doubling_allgather,  // all-gather: doubling blocks, (n−1)/n·S in all
  ring,                          // all-reduce: reduce-scatter ring + all-gather ring
  ring_allgather,                // all-gather: n−1 neighbour steps
  rabenseifner,
  bruck,
  recursive_halving,
  pairwise,
  point_to_point,
  dissemination,
  calibrated,  // a Calibration fit, whatever the library ran
  nccl_tree,            // NCCL all-reduce, double binary tree
  nvls,                 // NCCL all-reduce inside a node, reduced and multicast by the NVSwitch (NVLink SHARP)
  nvls_tree,            // NCCL all-reduce across nodes: NVLS inside each node, a tree over the NICs between
  ring_reduce_scatter,  // NCCL reduce-scatter
  pipelined_chain,      // NCCL broadcast and reduce
};

// Whose algorithms run the collectives: MPICH's size rules (mdtp's MPI communicator) or NCCL's
// rings and trees (GPU clusters).
enum class CollectiveLibrary { mpich, nccl };
const char* collective_library_name(CollectiveLibrary library);  // "mpich" | "nccl"
CollectiveLibrary parse_collective_library(const std::string& name);
const char* algorithm_name(CollectiveAlgorithm algorithm);

// The all-reduce algorithms NCCL may use, as NCCL_ALGO lists them ("Ring,Tree"): the tuner takes the
// quickest of those the group can run (NVLS needs an NVLink-SHARP switch and, across nodes, two or
// more of the group's GPUs per node).  Other collectives are rings whatever the list says; an
// all-reduce none of the listed algorithms can run falls back to the ring.  NCCL before 2.17 has no
// NVLS ("ring,tree"), 2.17 no NVLS-tree ("ring,tree,nvls"); mdtp's own collectives, which a
// simulated cluster runs, are rings ("ring").
struct NcclAlgorithms {
  bool ring = true, tree = true, nvls = true, nvls_tree = true;
  bool all() const { return ring && tree && nvls && nvls_tree; }
};
// "auto" (all of them) or a comma list of ring, tree, nvls, nvlstree (any case, NCCL's names);
// mdtp::Error naming the word and the choices otherwise.
NcclAlgorithms parse_nccl_algorithms(const std::string& list);
std::string nccl_algorithms_name(const NcclAlgorithms& algorithms);  // "auto" or "ring,tree", ...

// Size thresholds in bytes (MPICH CVAR defaults, MPICH 3.x–4.x).
struct AlgorithmSelection {
  std::int64_t bcast_short_bytes = 12288;    // MPIR_CVAR_BCAST_SHORT_MSG_SIZE: binomial below
  std::int64_t bcast_long_bytes = 524288;    // MPIR_CVAR_BCAST_LONG_MSG_SIZE: ring all-gather from here
  int bcast_min_procs = 8;                   // MPIR_CVAR_BCAST_MIN_PROCS: binomial on fewer ranks
  std::int64_t reduce_short_bytes = 2048;    // MPIR_CVAR_REDUCE_SHORT_MSG_SIZE: binomial up to here
  std::int64_t allreduce_short_bytes = 2048; // MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE: recursive doubling up to here
  std::int64_t allgather_short_bytes = 81920;   // MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE (total): Bruck below
  std::int64_t allgather_long_bytes = 524288;   // MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE (total): ring from here
  std::int64_t reduce_scatter_long_bytes = 524288;  // MPIR_CVAR_REDSCAT_COMMUTATIVE_LONG_MSG_SIZE
  // Large all-reduce: the ring of docs/theory.md §5 (NCCL's, and the published tables') or, false,
  // MPICH's Rabenseifner; both move 2(n−1)/n·S, they differ in the α term.
  bool ring_all_reduce = true;
  // NCCL: the all-reduce algorithms the tuner may pick from (NCCL_ALGO); every one by default.
  NcclAlgorithms nccl;
  CollectiveLibrary library = CollectiveLibrary::mpich;
};

// The algorithm an op uses for `elements` of `element_bytes` each on n ranks.
CollectiveAlgorithm select_algorithm(CollectiveOp op, int n, std::int64_t elements, std::size_t element_bytes,
                                     const AlgorithmSelection& selection);
// Its α-β time for S bytes (logical, see comm/ledger.hpp) on one link.  NVLS and NVLS-tree, which
// also need the switch's figures and the group's spread, are timed by nccl_seconds.
double algorithm_seconds(CollectiveAlgorithm algorithm, int n, std::int64_t bytes, const LinkParams& link);

// NVLink SHARP (NVSwitch 3: DGX H100/H200, NCCL >= 2.17): an all-reduce reduced in the switch and
// multicast back, each GPU sending and receiving its S bytes once, at an algorithm bandwidth the
// switch sets (measured: about 275 GB/s on eight H100s against the ring's 206), after a fixed
// latency (NCCL's tuner constant).
struct NvlsParams {
  double alpha = 0.0;      // s
  double bandwidth = 0.0;  // B/s of S, the all-reduce's algorithm bandwidth
};

// Where a group's ranks sit: the link class its traffic crosses and, where it crosses nodes, its
// ranks on each of its nodes (alike on every node under mdtp's rank order) and the NICs per node
// its channels leave through (min(ranks_per_node, nics_per_node)); both 1 for a group inside a node.
struct GroupSpan {
  LinkClass link = LinkClass::intra_node;
  int ranks_per_node = 1;
  int nics = 1;
};

struct TimeModel {
  // Placeholders until calibrated: shared-memory-like intra-node links (1 µs, 20 GB/s) and an
  // InfiniBand-like network (5 µs, 10 GB/s).
  std::map<LinkClass, LinkParams> links = {{LinkClass::intra_node, {1e-6, 1.0 / 20e9}},
                                           {LinkClass::inter_node, {5e-6, 1.0 / 10e9}}};
  // Eigen's 1024³ GEMM on one core of the development machines with -march=native (docs/theory.md §6).
  std::map<DType, double> gemm_flops = {{DType::f32, 141e9}, {DType::f64, 64e9}};
  AlgorithmSelection algorithms;
  Calibration calibration;  // takes precedence over everything above
  // NICs a node sends through in parallel (rail-optimised: one per GPU).  A group with k ranks on
  // each of its nodes spreads its traffic over min(k, nics_per_node) of them (NCCL opens a channel
  // per GPU pair, each leaving through its GPU's own NIC), capped by the intra-node link that feeds
  // them.  1: one NIC per node, as a host cluster of MPI ranks has.
  int nics_per_node = 1;
  // The NVSwitch's NVLink SHARP, where the cluster has it (cluster.hpp `links.intra_node.nvls`).
  std::optional<NvlsParams> nvls;
  // NCCL's bandwidth per channel on each link class, where the cluster gives it (cluster.hpp
  // `links.*.channel_bandwidth`): how many SMs a collective holds (collective_sms.hpp).
  std::map<LinkClass, double> channel_bandwidth;

  // The link a group crossing nodes with `nics` NICs per node in parallel sees: the inter-node
  // link's latency, min(nics x its bandwidth, the intra-node bandwidth).  The link class's own
  // parameters for nics = 1 or an intra-node group.
  LinkParams link(LinkClass link_class, int nics) const;

  LinkParams link(LinkClass link_class) const;
  double gemm_rate(DType dtype) const;  // flop/s; mdtp::Error when unknown for that dtype
};

struct CallEstimate {
  double seconds = 0.0;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::none;
  LinkClass link = LinkClass::intra_node;
};

// NCCL's algorithm for an op on a group spread as `span`: the ring, or for all-reduce the quickest
// the model's NcclAlgorithms allow and the group can run.
CollectiveAlgorithm select_nccl_algorithm(CollectiveOp op, int n, std::int64_t bytes, const GroupSpan& span,
                                          const TimeModel& model);
// An NCCL algorithm's time for S bytes on a group spread as `span` (algorithm_seconds on the
// group's link for all but NVLS and NVLS-tree).
double nccl_seconds(CollectiveAlgorithm algorithm, int n, std::int64_t bytes, const GroupSpan& span,
                    const TimeModel& model);

// One call on the topology's link class for its group (and the NICs it spreads over).
CallEstimate predict_call(const PlannedCall& call, const Topology& topology, const TimeModel& model);
// The same for a call whose group's spread is known (the whole-step model's dp and pp groups).
CallEstimate predict_on_link(CollectiveOp op, int group_size, std::int64_t elements, DType dtype,
                             const GroupSpan& span, const TimeModel& model);
// How the group of that name sits on the topology's nodes, its NICs capped at nics_per_node.
GroupSpan group_span(const Topology& topology, const std::string& group, int nics_per_node);

// The plan's time per (phase, group, op), with the ledger's byte totals beside it.
struct PredictedTotals {
  LedgerKey key;
  int group_size = 0;
  LinkClass link = LinkClass::intra_node;
  std::int64_t calls = 0;
  std::int64_t logical_bytes = 0;
  double bus_bytes = 0.0;
  double seconds = 0.0;
  std::string algorithms;  // the algorithms used, e.g. "binomial_tree" or "binomial_tree+ring"
};
std::vector<PredictedTotals> predict_plan(const std::vector<PlannedCall>& plan, const Topology& topology,
                                          const TimeModel& model);

}  // namespace mdtp::cost
