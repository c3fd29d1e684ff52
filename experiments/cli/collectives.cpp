// mdtp collectives: single collectives timed on the groups a cluster's fabric gives, beside the
// analytic model's time for the same (ring) algorithm — the check of the simulated network against
// the α-β model (docs/simulate.md), and on real hardware a small nccl-tests-like probe.
//
//   mdtp simulate --cluster dgx-h100 --gpus 16 -- collectives --sizes 1M,16M
//
// Groups: `node` (the ranks of one node: NVLink), `rail` (GPU i of every node: one NIC each), every
// group of a kind running at once, as a TP and a DP group of a real step do, and `span` (every
// rank: one ring through all the nodes, as a TP group larger than a node).  Each call is
// timed alone after a barrier on its group, from the last rank's start to the last rank's end (the
// barrier releases ranks at different times; one clock for all ranks is needed, which a simulated
// cluster and a single host have); the median over --iters calls.  Prediction: cost::algorithm_seconds for the ring on the group's link (the
// cluster's α and bandwidth x efficiency), S = the whole buffer (the ledger's logical bytes); a
// span's ring is as slow as its hops between nodes, each through one NIC (its latency NVLink's and
// the rail's α).  Beside it, `nccl`: the
// same collective as NCCL spreads it, over a channel per GPU of the group on a node, each through
// its own GPU's NIC (the step model's rule: min(k, NICs) NICs, capped by NVLink) — where mdtp's one
// ring and NCCL part.  Last, simulated: the share of the bytes the links carried during the timed
// calls that moved beside another GPU pair's transfer on a link, and while a link was asked more
// than its bandwidth (shared/contended, simulate/link_traffic.hpp) — 0 where the model's "no link
// shared" holds; "-" on real hardware.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "comm/mpi_communicator.hpp"
#include "comm/run_clock.hpp"
#include "comm/wait_policy.hpp"
#include "core/backend.hpp"
#include "cost/cluster.hpp"
#include "cost/time_model.hpp"
#include "run/simulation_context.hpp"
#include "simulate/link_traffic.hpp"

namespace mdtp::cli {
namespace {

struct CollectivesOptions {
  std::string cluster;
  std::vector<std::int64_t> sizes = {1 << 20, 16 << 20};
  int iters = 3;
};

const std::vector<std::pair<CollectiveOp, cost::CollectiveAlgorithm>> kRings = {
    {CollectiveOp::all_reduce, cost::CollectiveAlgorithm::ring},
    {CollectiveOp::all_gather, cost::CollectiveAlgorithm::ring_allgather},
    {CollectiveOp::reduce_scatter, cost::CollectiveAlgorithm::ring_reduce_scatter}};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

int run_collectives(const CollectivesOptions& o) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::string cluster_path;
  if (!o.cluster.empty()) {
    cluster_path = cost::find_cluster(o.cluster);
  } else {
    const auto sim = run::simulation_from_environment();
    require(sim.has_value(), "mdtp collectives needs --cluster (the links its predictions use)");
    cluster_path = sim->cluster_path;
  }
  const cost::Cluster cluster = cost::load_cluster(cluster_path);
  const cost::TimeModel model = cost::cluster_time_model(cluster);
  const int per_node = std::min(cluster.gpus_per_node, world);
  require(world % per_node == 0, "mdtp collectives needs whole nodes: ", world, " ranks on nodes of ", per_node);
  const auto backend = make_host_backend();
  const WaitPolicy policy = simulated_build() ? WaitPolicy::library : resolve_wait_policy(measure_node_occupancy(MPI_COMM_WORLD));

  struct Kind {
    const char* name;
    int color, size;
    LinkClass link;
    int gpus_per_node;  // of the group: NCCL's channels leave through that many NICs
  };
  std::vector<Kind> kinds;
  if (per_node > 1) kinds.push_back({"node", rank / per_node, per_node, LinkClass::intra_node, per_node});
  if (world > per_node) kinds.push_back({"rail", rank % per_node, world / per_node, LinkClass::inter_node, 1});
  if (world > per_node && per_node > 1) kinds.push_back({"span", 0, world, LinkClass::inter_node, per_node});
  // Rank 0 counts the simulated links' traffic during its timed calls (the one simulator sees
  // every rank's transfers).
  std::shared_ptr<simulate::LinkTraffic> links;
  if (simulated_build() && rank == 0) {
    links = simulate::LinkTraffic::start_counting_simulated_network();
    links->set_counting(false);
  }
  if (rank == 0)
    std::cout << fmt::format("{:<5} {:>5} {:<15} {:>10} {:>12} {:>12} {:>8} {:>12} {:>17}\n", "group", "ranks", "op",
                             "bytes", "time (us)", "model (us)", "ratio", "nccl (us)", "shared/contended");
  for (const Kind& kind : kinds) {
    MPI_Comm split = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(MPI_COMM_WORLD, kind.color, rank, &split), "MPI_Comm_split");
    auto comm = make_mpi_communicator(kind.name, split, nullptr, policy);
    cost::LinkParams link = model.link(kind.link);
    cost::LinkParams channels =
        model.link(kind.link, kind.link == LinkClass::inter_node ? std::min(kind.gpus_per_node, cluster.nics_per_node) : 1);
    // A span's hop between nodes goes from a GPU through its node's NVLink switch and a rail to the
    // next node's GPU: the route's latency is both links' α, its bandwidth one NIC's.
    if (kind.gpus_per_node > 1 && kind.link == LinkClass::inter_node) {
      link.alpha += model.link(LinkClass::intra_node).alpha;
      channels.alpha = link.alpha;
    }
    for (const auto& [op, algorithm] : kRings) {
      for (std::int64_t bytes : o.sizes) {
        const std::int64_t elements = std::max<std::int64_t>(kind.size, bytes / 4 / kind.size * kind.size);
        Tensor full = backend->zeros({elements}, DType::f32, MemCategory::communication);
        Tensor shard = backend->zeros({elements / kind.size}, DType::f32, MemCategory::communication);
        std::vector<double> times;
        const simulate::LinkTraffic::Bytes before = links ? links->bytes() : simulate::LinkTraffic::Bytes{};
        for (int i = 0; i < o.iters; ++i) {
          comm->barrier();
          double span[2] = {std::chrono::duration<double>(RunClock::now().time_since_epoch()).count(), 0};
          if (links) links->set_counting(true);
          if (op == CollectiveOp::all_reduce) comm->all_reduce(full);
          if (op == CollectiveOp::all_gather) comm->all_gather(shard, full);
          if (op == CollectiveOp::reduce_scatter) comm->reduce_scatter(full, shard);
          if (links) links->set_counting(false);
          span[1] = std::chrono::duration<double>(RunClock::now().time_since_epoch()).count();
          MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          times.push_back(span[1] - span[0]);
        }
        const double measured = median(times);
        const double predicted = cost::algorithm_seconds(algorithm, kind.size, elements * 4, link);
        const double nccl = cost::algorithm_seconds(algorithm, kind.size, elements * 4, channels);
        const simulate::LinkTraffic::Bytes moved = links ? links->bytes() - before : simulate::LinkTraffic::Bytes{};
        const std::string share = moved.carried > 0 ? fmt::format("{:.1f}/{:.1f}%", 100 * moved.shared / moved.carried,
                                                                  100 * moved.contended / moved.carried)
                                                    : "-";
        if (rank == 0)
          std::cout << fmt::format("{:<5} {:>5} {:<15} {:>10} {:>12.3f} {:>12.3f} {:>8.4f} {:>12.3f} {:>17}\n", kind.name,
                                   kind.size, collective_name(op), elements * 4, measured * 1e6, predicted * 1e6,
                                   measured / predicted, nccl * 1e6, share);
      }
    }
  }
  if (links) std::cout << "over every timed call, " << links->summary(3) << "\n";
  return 0;
}

}  // namespace

Command add_collectives(CLI::App& root) {
  auto o = std::make_shared<CollectivesOptions>();
  CLI::App* app = add_command(root, "collectives",
                              "(MPI) time ring collectives on a cluster's node, rail and node-spanning groups beside the "
                              "alpha-beta model");
  app->footer("Mostly run simulated (docs/simulate.md):\n"
              "  mdtp simulate --cluster dgx-h100 --gpus 16 -- collectives --sizes 1M,16M");
  add(*app, "--cluster", o->cluster, "cluster preset whose links predict the times (simulated: the simulated one)");
  add(*app, "--sizes", o->sizes, "buffer sizes in bytes (suffixes K, M, G)")->transform(byte_count())->type_name("BYTES,...");
  add(*app, "--iters", o->iters, "timed calls per size (the median is shown)")->check(at_least(1));
  return {app, true, [o](const std::string&) { return run_collectives(*o); }};
}

}  // namespace mdtp::cli
