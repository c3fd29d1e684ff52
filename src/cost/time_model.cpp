#include "cost/time_model.hpp"

#include <algorithm>
#include <set>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

bool is_pof2(int n) { return n > 0 && (n & (n - 1)) == 0; }

int floor_log2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

int ceil_log2(int n) { return is_pof2(n) ? floor_log2(n) : floor_log2(n) + 1; }

int pof2_below(int n) { return 1 << floor_log2(n); }

}  // namespace

const char* algorithm_name(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::none: return "none";
    case CollectiveAlgorithm::binomial_tree: return "binomial_tree";
    case CollectiveAlgorithm::scatter_doubling_allgather: return "scatter+doubling_allgather";
    case CollectiveAlgorithm::scatter_ring_allgather: return "scatter+ring_allgather";
    case CollectiveAlgorithm::recursive_doubling: return "recursive_doubling";
    case CollectiveAlgorithm::recursive_doubling_allgather: return "recursive_doubling_allgather";
    case CollectiveAlgorithm::ring: return "ring";
    case CollectiveAlgorithm::ring_allgather: return "ring_allgather";
    case CollectiveAlgorithm::rabenseifner: return "rabenseifner";
    case CollectiveAlgorithm::bruck: return "bruck";
    case CollectiveAlgorithm::recursive_halving: return "recursive_halving";
    case CollectiveAlgorithm::pairwise: return "pairwise";
    case CollectiveAlgorithm::point_to_point: return "point_to_point";
    case CollectiveAlgorithm::dissemination: return "dissemination";
    case CollectiveAlgorithm::calibrated: return "calibrated";
    case CollectiveAlgorithm::nccl_tree: return "nccl_tree";
    case CollectiveAlgorithm::ring_reduce_scatter: return "ring_reduce_scatter";
    case CollectiveAlgorithm::pipelined_chain: return "pipelined_chain";
  }
  return "?";
}

const char* collective_library_name(CollectiveLibrary library) {
  return library == CollectiveLibrary::nccl ? "nccl" : "mpich";
}

CollectiveLibrary parse_collective_library(const std::string& name) {
  if (name == "mpich") return CollectiveLibrary::mpich;
  if (name == "nccl") return CollectiveLibrary::nccl;
  throw_error("unknown collective library '", name, "'; expected mpich or nccl");
}

CollectiveAlgorithm select_nccl_algorithm(CollectiveOp op, int n, std::int64_t bytes, const LinkParams& link,
                                          bool tree_allowed) {
  require(n >= 1, "a collective needs a group of at least one rank; got n=", n);
  if (op == CollectiveOp::send || op == CollectiveOp::recv) return CollectiveAlgorithm::point_to_point;
  if (n == 1) return CollectiveAlgorithm::none;
  switch (op) {
    case CollectiveOp::all_reduce: {
      if (!tree_allowed) return CollectiveAlgorithm::ring;
      const double ring = algorithm_seconds(CollectiveAlgorithm::ring, n, bytes, link);
      const double tree = algorithm_seconds(CollectiveAlgorithm::nccl_tree, n, bytes, link);
      return tree < ring ? CollectiveAlgorithm::nccl_tree : CollectiveAlgorithm::ring;
    }
    case CollectiveOp::all_gather: return CollectiveAlgorithm::ring_allgather;
    case CollectiveOp::reduce_scatter: return CollectiveAlgorithm::ring_reduce_scatter;
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce: return CollectiveAlgorithm::pipelined_chain;
    case CollectiveOp::barrier: return CollectiveAlgorithm::nccl_tree;  // an all-reduce of nothing
    default: break;
  }
  throw_error("no NCCL algorithm model for collective op ", collective_name(op));
}

CollectiveAlgorithm select_algorithm(CollectiveOp op, int n, std::int64_t elements, std::size_t element_bytes,
                                     const AlgorithmSelection& s) {
  require(n >= 1, "a collective needs a group of at least one rank; got n=", n);
  require(elements >= 0, "a collective needs a non-negative element count; got ", elements);
  if (op == CollectiveOp::send || op == CollectiveOp::recv) return CollectiveAlgorithm::point_to_point;
  if (n == 1) return CollectiveAlgorithm::none;
  const std::int64_t bytes = elements * static_cast<std::int64_t>(element_bytes);
  switch (op) {
    case CollectiveOp::broadcast:
      if (bytes < s.bcast_short_bytes || n < s.bcast_min_procs) return CollectiveAlgorithm::binomial_tree;
      if (bytes < s.bcast_long_bytes && is_pof2(n)) return CollectiveAlgorithm::scatter_doubling_allgather;
      return CollectiveAlgorithm::scatter_ring_allgather;
    case CollectiveOp::reduce:
      if (bytes > s.reduce_short_bytes && elements >= pof2_below(n)) return CollectiveAlgorithm::rabenseifner;
      return CollectiveAlgorithm::binomial_tree;
    case CollectiveOp::all_reduce:
      if (bytes <= s.allreduce_short_bytes || elements < pof2_below(n)) return CollectiveAlgorithm::recursive_doubling;
      return s.ring_all_reduce ? CollectiveAlgorithm::ring : CollectiveAlgorithm::rabenseifner;
    case CollectiveOp::all_gather:  // `bytes` is the whole gathered buffer, as MPICH's total
      if (bytes < s.allgather_long_bytes && is_pof2(n)) return CollectiveAlgorithm::recursive_doubling_allgather;
      if (bytes < s.allgather_short_bytes) return CollectiveAlgorithm::bruck;
      return CollectiveAlgorithm::ring_allgather;
    case CollectiveOp::reduce_scatter:
      if (bytes < s.reduce_scatter_long_bytes) return CollectiveAlgorithm::recursive_halving;
      return CollectiveAlgorithm::pairwise;
    case CollectiveOp::barrier: return CollectiveAlgorithm::dissemination;
    default: break;
  }
  throw_error("no algorithm model for collective op ", collective_name(op));
}

double algorithm_seconds(CollectiveAlgorithm algorithm, int n, std::int64_t bytes, const LinkParams& link) {
  require(n >= 1, "a collective needs a group of at least one rank; got n=", n);
  const double a = link.alpha, b = link.beta, S = static_cast<double>(bytes);
  const double L = ceil_log2(n), frac = (n - 1.0) / n;
  switch (algorithm) {
    case CollectiveAlgorithm::none: return 0.0;
    case CollectiveAlgorithm::binomial_tree: return L * (a + S * b);
    case CollectiveAlgorithm::scatter_doubling_allgather: return 2.0 * L * a + 2.0 * frac * S * b;
    case CollectiveAlgorithm::scatter_ring_allgather: return (L + n - 1.0) * a + 2.0 * frac * S * b;
    case CollectiveAlgorithm::recursive_doubling:
      // On a non-power of 2, MPICH folds the extra ranks in and out: 2 more steps.
      return (floor_log2(n) + (is_pof2(n) ? 0 : 2)) * (a + S * b);
    case CollectiveAlgorithm::ring: return 2.0 * (n - 1.0) * a + 2.0 * frac * S * b;
    case CollectiveAlgorithm::rabenseifner: return 2.0 * L * a + 2.0 * frac * S * b;
    case CollectiveAlgorithm::recursive_doubling_allgather:
    case CollectiveAlgorithm::bruck:
    case CollectiveAlgorithm::recursive_halving: return L * a + frac * S * b;
    case CollectiveAlgorithm::ring_allgather:
    case CollectiveAlgorithm::ring_reduce_scatter:
    case CollectiveAlgorithm::pairwise: return (n - 1.0) * a + frac * S * b;
    case CollectiveAlgorithm::nccl_tree: return 2.0 * L * a + 2.0 * S * b;
    case CollectiveAlgorithm::pipelined_chain: return (n - 1.0) * a + S * b;
    case CollectiveAlgorithm::point_to_point: return a + S * b;
    case CollectiveAlgorithm::dissemination: return L * a;
    case CollectiveAlgorithm::calibrated: break;
  }
  throw_error("algorithm ", algorithm_name(algorithm), " has no α-β formula (a calibrated call is charged its fit)");
}

LinkParams TimeModel::link(LinkClass link_class) const {
  if (auto it = calibration.links.find(link_class); it != calibration.links.end()) return it->second;
  auto it = links.find(link_class);
  require(it != links.end(), "the time model has no α-β parameters for link class ", link_class_name(link_class));
  return it->second;
}

LinkParams TimeModel::link(LinkClass link_class, int nics) const {
  LinkParams p = link(link_class);
  if (link_class != LinkClass::inter_node || nics <= 1) return p;
  const double feed = 1.0 / link(LinkClass::intra_node).beta;
  p.beta = 1.0 / std::min(static_cast<double>(nics) / p.beta, std::max(feed, 1.0 / p.beta));
  return p;
}

namespace {

// parallel_nics for a group already known to cross nodes.
int crossing_nics(const Topology& topology, const std::string& group, int nics_per_node) {
  if (nics_per_node <= 1) return 1;  // one NIC per node: nothing to count
  return std::max(1, std::min(topology.ranks_per_node_in(group), nics_per_node));
}

}  // namespace

int parallel_nics(const Topology& topology, const std::string& group, int nics_per_node) {
  return topology.link_class(group) == LinkClass::inter_node ? crossing_nics(topology, group, nics_per_node) : 1;
}

double TimeModel::gemm_rate(DType dtype) const {
  if (auto it = calibration.gemm_flops.find(dtype); it != calibration.gemm_flops.end()) return it->second;
  auto it = gemm_flops.find(dtype);
  require(it != gemm_flops.end() && it->second > 0, "the time model has no GEMM rate for dtype ", dtype_name(dtype));
  return it->second;
}

CallEstimate predict_on_link(CollectiveOp op, int group_size, std::int64_t elements, DType dtype, LinkClass link_class,
                             const TimeModel& model, int nics) {
  CallEstimate e;
  e.link = link_class;
  const std::int64_t bytes = elements * static_cast<std::int64_t>(dtype_size(dtype));
  if (group_size > 1 || op == CollectiveOp::send || op == CollectiveOp::recv) {
    if (const CalibrationFit* fit = model.calibration.find(op, e.link, group_size, bytes)) {
      e.algorithm = CollectiveAlgorithm::calibrated;
      e.seconds = fit->seconds(bytes);
      return e;
    }
  }
  const LinkParams link = model.link(e.link, nics);
  // The all-gather/reduce-scatter algorithms are chosen, as in MPICH, on the whole buffer.
  e.algorithm = model.algorithms.library == CollectiveLibrary::nccl
                    ? select_nccl_algorithm(op, group_size, bytes, link, model.algorithms.nccl_tree)
                    : select_algorithm(op, group_size, elements, dtype_size(dtype), model.algorithms);
  e.seconds = algorithm_seconds(e.algorithm, group_size, bytes, link);
  return e;
}

CallEstimate predict_call(const PlannedCall& call, const Topology& topology, const TimeModel& model) {
  const LinkClass link = topology.link_class(call.group);
  const int nics = link == LinkClass::inter_node ? crossing_nics(topology, call.group, model.nics_per_node) : 1;
  return predict_on_link(call.op, call.group_size, call.elements, call.dtype, link, model, nics);
}

std::vector<PredictedTotals> predict_plan(const std::vector<PlannedCall>& plan, const Topology& topology,
                                          const TimeModel& model) {
  std::map<LedgerKey, PredictedTotals> rows;
  std::map<LedgerKey, std::set<std::string>> used;
  for (const auto& call : plan) {
    LedgerKey key{call.phase, call.group, call.op};
    const LedgerEntry entry = to_ledger_entry(call);
    const CallEstimate e = predict_call(call, topology, model);
    PredictedTotals& t = rows[key];
    t.key = key;
    t.group_size = call.group_size;
    t.link = e.link;
    t.calls += 1;
    t.logical_bytes += entry.logical_bytes;
    t.bus_bytes += entry.bus_bytes;
    t.seconds += e.seconds;
    used[key].insert(algorithm_name(e.algorithm));
  }
  std::vector<PredictedTotals> out;
  for (auto& [key, t] : rows) {
    for (const auto& name : used[key]) t.algorithms += (t.algorithms.empty() ? "" : "+") + name;
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace mdtp::cost
