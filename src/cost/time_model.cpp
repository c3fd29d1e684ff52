#include "cost/time_model.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <utility>

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
    case CollectiveAlgorithm::nvls: return "nvls";
    case CollectiveAlgorithm::nvls_tree: return "nvls_tree";
  }
  return "?";
}

NcclAlgorithms parse_nccl_algorithms(const std::string& list) {
  if (list == "auto") return {};
  NcclAlgorithms a{.ring = false, .tree = false, .nvls = false, .nvls_tree = false};
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    std::string word = list.substr(begin, end - begin);
    for (char& ch : word) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (word == "ring") a.ring = true;
    else if (word == "tree") a.tree = true;
    else if (word == "nvls") a.nvls = true;
    else if (word == "nvlstree" || word == "nvls_tree") a.nvls_tree = true;
    else
      throw_error("unknown NCCL algorithm '", word, "' in '", list,
                  "'; expected auto or a comma list of ring, tree, nvls, nvlstree");
    begin = end + 1;
  }
  return a;
}

std::string nccl_algorithms_name(const NcclAlgorithms& a) {
  if (a.all()) return "auto";
  std::string name;
  for (const auto& [on, word] : {std::pair{a.ring, "ring"}, {a.tree, "tree"}, {a.nvls, "nvls"}, {a.nvls_tree, "nvlstree"}}) {
    if (!on) continue;
    if (!name.empty()) name += ',';
    name += word;
  }
  return name;
}

const char* collective_library_name(CollectiveLibrary library) {
  return library == CollectiveLibrary::nccl ? "nccl" : "mpich";
}

CollectiveLibrary parse_collective_library(const std::string& name) {
  if (name == "mpich") return CollectiveLibrary::mpich;
  if (name == "nccl") return CollectiveLibrary::nccl;
  throw_error("unknown collective library '", name, "'; expected mpich or nccl");
}

namespace {

struct NcclCall {
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::none;
  double seconds = 0.0;
};

// NCCL's algorithm for an op and its time: an all-reduce's candidates are timed to choose among
// them, so the chosen one's time comes with it.
NcclCall nccl_call(CollectiveOp op, int n, std::int64_t bytes, const GroupSpan& span, const TimeModel& model) {
  require(n >= 1, "a collective needs a group of at least one rank; got n=", n);
  auto timed = [&](CollectiveAlgorithm algorithm) {
    return NcclCall{algorithm, nccl_seconds(algorithm, n, bytes, span, model)};
  };
  if (op == CollectiveOp::send || op == CollectiveOp::recv) return timed(CollectiveAlgorithm::point_to_point);
  if (n == 1) return {};
  switch (op) {
    case CollectiveOp::all_reduce: {
      const NcclAlgorithms& allowed = model.algorithms.nccl;
      const bool across = span.link == LinkClass::inter_node;
      // NVLS-tree reduces inside each node first: it needs two or more of the group's GPUs there.
      const std::pair<CollectiveAlgorithm, bool> candidates[] = {
          {CollectiveAlgorithm::ring, allowed.ring},
          {CollectiveAlgorithm::nccl_tree, allowed.tree},
          {CollectiveAlgorithm::nvls, allowed.nvls && model.nvls && !across},
          {CollectiveAlgorithm::nvls_tree, allowed.nvls_tree && model.nvls && across && span.ranks_per_node >= 2},
      };
      std::optional<NcclCall> best;
      for (const auto& [algorithm, usable] : candidates) {
        if (!usable) continue;
        const NcclCall call = timed(algorithm);
        if (!best || call.seconds < best->seconds) best = call;
      }
      return best ? *best : timed(CollectiveAlgorithm::ring);  // none of the listed can run: the ring
    }
    case CollectiveOp::all_gather: return timed(CollectiveAlgorithm::ring_allgather);
    case CollectiveOp::reduce_scatter: return timed(CollectiveAlgorithm::ring_reduce_scatter);
    case CollectiveOp::broadcast:
    case CollectiveOp::reduce: return timed(CollectiveAlgorithm::pipelined_chain);
    case CollectiveOp::barrier: return timed(CollectiveAlgorithm::nccl_tree);  // an all-reduce of nothing
    default: break;
  }
  throw_error("no NCCL algorithm model for collective op ", collective_name(op));
}

}  // namespace

CollectiveAlgorithm select_nccl_algorithm(CollectiveOp op, int n, std::int64_t bytes, const GroupSpan& span,
                                          const TimeModel& model) {
  return nccl_call(op, n, bytes, span, model).algorithm;
}

double nccl_seconds(CollectiveAlgorithm algorithm, int n, std::int64_t bytes, const GroupSpan& span,
                    const TimeModel& model) {
  const LinkParams link = model.link(span.link, span.nics);
  if (algorithm != CollectiveAlgorithm::nvls && algorithm != CollectiveAlgorithm::nvls_tree)
    return algorithm_seconds(algorithm, n, bytes, link);
  require(model.nvls.has_value(), "algorithm ", algorithm_name(algorithm),
          " needs an NVLink-SHARP switch; the cluster declares none (links.intra_node.nvls)");
  const NvlsParams& s = *model.nvls;
  const double S = static_cast<double>(bytes);
  if (algorithm == CollectiveAlgorithm::nvls) return s.alpha + S / s.bandwidth;
  // NVLS-tree: inside each node the switch reduces the node's S bytes (each of its k GPUs ends with
  // S/k of the node's sum) and multicasts the result back; between nodes each GPU all-reduces its
  // S/k over its own NIC by a tree of ⌈log₂ N⌉ levels, up and down.  The two are pipelined, so the
  // slower sets the rate.  Over two nodes the tree is one exchange (S/k each way per NIC); over
  // more, reduce up and broadcast down move it twice, as the ring's 2(N−1)/N nearly does.
  const int k = std::max(1, span.ranks_per_node);
  const int nodes = std::max(1, n / k);
  const double inter_passes = nodes <= 2 ? 1.0 : 2.0;
  const double per_byte = std::max(1.0 / s.bandwidth, inter_passes * link.beta);
  return s.alpha + 2.0 * ceil_log2(nodes) * link.alpha + S * per_byte;
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
    case CollectiveAlgorithm::calibrated:
    case CollectiveAlgorithm::nvls:
    case CollectiveAlgorithm::nvls_tree: break;
  }
  throw_error("algorithm ", algorithm_name(algorithm),
              " has no α-β formula on one link (a calibrated call is charged its fit; NVLS: nccl_seconds)");
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

GroupSpan group_span(const Topology& topology, const std::string& group, int nics_per_node) {
  GroupSpan span;
  span.link = topology.link_class(group);
  if (span.link != LinkClass::inter_node) return span;  // inside a node: neither is read
  span.ranks_per_node = std::max(1, topology.ranks_per_node_in(group));
  span.nics = std::max(1, std::min(span.ranks_per_node, nics_per_node));
  return span;
}

double TimeModel::gemm_rate(DType dtype) const {
  if (auto it = calibration.gemm_flops.find(dtype); it != calibration.gemm_flops.end()) return it->second;
  auto it = gemm_flops.find(dtype);
  require(it != gemm_flops.end() && it->second > 0, "the time model has no GEMM rate for dtype ", dtype_name(dtype));
  return it->second;
}

CallEstimate predict_on_link(CollectiveOp op, int group_size, std::int64_t elements, DType dtype,
                             const GroupSpan& group, const TimeModel& model) {
  // A send or receive joins two GPUs: one NIC each, however many of the group share their nodes.
  const bool point_to_point = op == CollectiveOp::send || op == CollectiveOp::recv;
  const GroupSpan span = point_to_point ? GroupSpan{.link = group.link} : group;
  CallEstimate e;
  e.link = span.link;
  const std::int64_t bytes = elements * static_cast<std::int64_t>(dtype_size(dtype));
  if (group_size > 1 || point_to_point) {
    if (const CalibrationFit* fit = model.calibration.find(op, e.link, group_size, bytes)) {
      e.algorithm = CollectiveAlgorithm::calibrated;
      e.seconds = fit->seconds(bytes);
      return e;
    }
  }
  if (model.algorithms.library == CollectiveLibrary::nccl) {
    const NcclCall call = nccl_call(op, group_size, bytes, span, model);
    e.algorithm = call.algorithm;
    e.seconds = call.seconds;
    return e;
  }
  // The all-gather/reduce-scatter algorithms are chosen, as in MPICH, on the whole buffer.
  e.algorithm = select_algorithm(op, group_size, elements, dtype_size(dtype), model.algorithms);
  e.seconds = algorithm_seconds(e.algorithm, group_size, bytes, model.link(span.link, span.nics));
  return e;
}

CallEstimate predict_call(const PlannedCall& call, const Topology& topology, const TimeModel& model) {
  return predict_on_link(call.op, call.group_size, call.elements, call.dtype,
                         group_span(topology, call.group, model.nics_per_node), model);
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
