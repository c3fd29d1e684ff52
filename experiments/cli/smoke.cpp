// mdtp smoke: the foundation's end-to-end check under mpiexec.  Builds the mesh (default: the
// 8-rank PTD layout tp=2, pp=2, dp=2), prints it, runs an all-reduce of the global rank on every
// group this rank belongs to, checks each result against the sum of the group's ranks, and
// prints the ledger (mean and max over ranks) with the wait policy and oversubscription.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <numeric>
#include <optional>

#include "cli/commands.hpp"
#include "comm/ledger_stats.hpp"
#include "core/backend.hpp"
#include "mesh/mesh.hpp"

namespace mdtp::cli {
namespace {

struct SmokeOptions {
  std::optional<int> tp, pp;  // defaults depend on the world size
  MeshConfig config;
};

MeshConfig smoke_mesh(const SmokeOptions& o, int world) {
  MeshConfig config = o.config;
  config.world = world;
  config.tp = o.tp.value_or(world % 2 == 0 ? 2 : 1);
  config.pp = o.pp.value_or(world % (2 * config.tp) == 0 ? 2 : 1);
  return config;
}

// All-reduces (rank, 1) on every group of this rank and checks the sums; returns the failures.
int check_every_group(Mesh& mesh, CommLedger& ledger, int rank) {
  auto backend = make_host_backend();
  PhaseScope phase(ledger, "smoke");
  int failures = 0;
  for (const std::string& name : mesh.comm_names()) {
    Communicator& comm = mesh.comm(name);
    Tensor value = backend->from_f64({static_cast<double>(rank), 1.0}, {2}, DType::f64, MemCategory::communication);
    comm.all_reduce(value);
    const std::vector<int> members = comm.world_ranks();
    const double expected = std::accumulate(members.begin(), members.end(), 0.0);
    const std::vector<double> got = backend->to_f64(value);
    if (got[0] != expected || got[1] != static_cast<double>(members.size())) {
      fmt::print(stderr, "rank {}: all-reduce on {} gave ({:g}, {:g}), expected ({:g}, {})\n", rank, name, got[0],
                 got[1], expected, members.size());
      ++failures;
    }
  }
  return failures;
}

int run_smoke(const SmokeOptions& o) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CommLedger ledger;
  Mesh mesh(smoke_mesh(o, world), MPI_COMM_WORLD, ledger);
  if (rank == 0) {
    std::cout << mesh.topology().to_table() << "\n";
    std::cout << "wait policy: " << wait_policy_name(mesh.wait_policy()) << " (" << mesh.occupancy().local_ranks
              << " ranks on " << mesh.occupancy().cores << " cores, oversubscription "
              << mesh.occupancy().oversubscription() << ")\n\n";
  }
  const int failures = check_every_group(mesh, ledger, rank);
  int total_failures = 0;
  MPI_Allreduce(&failures, &total_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  const auto stats = reduce_ledger_stats(ledger, MPI_COMM_WORLD, mesh.wait_policy());
  if (rank == 0) {
    fmt::print("{:<12} {:<10} {:>5} {:>6} {:>12} {:>12} {:>12}\n", "group", "op", "size", "calls", "bytes", "mean us",
               "max us");
    for (const auto& s : stats)
      fmt::print("{:<12} {:<10} {:>5} {:>6.0f} {:>12.0f} {:>12.1f} {:>12.1f}\n", s.key.group, collective_name(s.key.op),
                 s.group_size, s.calls.max, s.logical_bytes.max, s.seconds.mean * 1e6, s.seconds.max * 1e6);
    fmt::print("\nsmoke: {} groups checked on {} ranks: {}\n", mesh.comm_names().size(), world,
               total_failures == 0 ? "all results correct" : "FAILURES (see above)");
  }
  return total_failures == 0 ? 0 : 1;
}

}  // namespace

Command add_smoke(CLI::App& root) {
  auto o = std::make_shared<SmokeOptions>();
  CLI::App* app = add_command(root, "smoke", "(MPI) run a collective on every mesh group and check it");
  app->footer(
      "Run under mpiexec: builds the mesh on the launched ranks, all-reduces on every group and checks the sums, "
      "then prints the ledger.");
  add(*app, "--tp", o->tp, "tensor-parallel size (default 2 when the world is even, else 1)");
  add(*app, "--pp", o->pp, "pipeline-parallel size (default 2 when 2*tp divides the world, else 1)");
  add(*app, "--cp", o->config.cp, "context-parallel size");
  add(*app, "--order", o->config.order, "axes, fastest-varying first");
  add_tp_mode(*app, "--tp-mode", o->config.tp_mode, "the TP sub-grid");
  add(*app, "--tp-depth", o->config.tp_depth, "2.5d depth d");
  add(*app, "--ranks-per-node", o->config.ranks_per_node, "ranks per node, in rank order (0: one node)");
  return {app, true, [o](const std::string&) { return run_smoke(*o); }};
}

}  // namespace mdtp::cli
