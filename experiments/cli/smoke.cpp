// mdtp smoke: the foundation's end-to-end check under mpiexec.  Builds the mesh (default: the
// 8-rank PTD layout tp=2, pp=2, dp=2), prints it, runs an all-reduce of the global rank on every
// group this rank belongs to, checks each result against the sum of the group's ranks, and
// prints the ledger (mean and max over ranks) with the wait policy and oversubscription.
#include <cstdio>
#include <iostream>
#include <numeric>

#include "cli/args.hpp"
#include "cli/commands.hpp"
#include "comm/ledger_stats.hpp"
#include "core/backend.hpp"
#include "mesh/mesh.hpp"

namespace mdtp::cli {

int run_smoke(const std::vector<std::string>& argv) {
  Args args(argv, {"--tp", "--pp", "--cp", "--order", "--tp-mode", "--tp-depth", "--ranks-per-node"}, {});
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MeshConfig config;
  config.world = world;
  config.tp = static_cast<int>(args.get_int("--tp", world % 2 == 0 ? 2 : 1));
  config.pp = static_cast<int>(args.get_int("--pp", world % (2 * config.tp) == 0 ? 2 : 1));
  config.cp = static_cast<int>(args.get_int("--cp", 1));
  config.order = args.get("--order", config.order);
  config.tp_mode = parse_tp_mode(args.get("--tp-mode", tp_mode_name(config.tp_mode)));
  config.tp_depth = static_cast<int>(args.get_int("--tp-depth", 1));
  config.ranks_per_node = static_cast<int>(args.get_int("--ranks-per-node", 0));

  CommLedger ledger;
  Mesh mesh(config, MPI_COMM_WORLD, ledger);
  if (rank == 0) {
    std::cout << mesh.topology().to_table() << "\n";
    std::cout << "wait policy: " << wait_policy_name(mesh.wait_policy()) << " (" << mesh.occupancy().local_ranks
              << " ranks on " << mesh.occupancy().cores << " cores, oversubscription "
              << mesh.occupancy().oversubscription() << ")\n\n";
  }
  auto backend = make_host_backend();
  int failures = 0;
  {
    PhaseScope phase(ledger, "smoke");
    for (const std::string& name : mesh.comm_names()) {
      Communicator& comm = mesh.comm(name);
      Tensor value = backend->from_f64({static_cast<double>(rank), 1.0}, {2}, DType::f64, MemCategory::communication);
      comm.all_reduce(value);
      std::vector<int> members = comm.world_ranks();
      double expected = std::accumulate(members.begin(), members.end(), 0.0);
      std::vector<double> got = backend->to_f64(value);
      if (got[0] != expected || got[1] != static_cast<double>(members.size())) {
        std::fprintf(stderr, "rank %d: all-reduce on %s gave (%g, %g), expected (%g, %zu)\n", rank, name.c_str(),
                     got[0], got[1], expected, members.size());
        ++failures;
      }
    }
  }
  int total_failures = 0;
  MPI_Allreduce(&failures, &total_failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  auto stats = reduce_ledger_stats(ledger, MPI_COMM_WORLD, mesh.wait_policy());
  if (rank == 0) {
    std::printf("%-12s %-10s %5s %6s %12s %12s %12s\n", "group", "op", "size", "calls", "bytes", "mean us", "max us");
    for (const auto& s : stats)
      std::printf("%-12s %-10s %5d %6.0f %12.0f %12.1f %12.1f\n", s.key.group.c_str(), collective_name(s.key.op),
                  s.group_size, s.calls.max, s.logical_bytes.max, s.seconds.mean * 1e6, s.seconds.max * 1e6);
    std::printf("\nsmoke: %zu groups checked on %d ranks: %s\n", mesh.comm_names().size(), world,
                total_failures == 0 ? "all results correct" : "FAILURES (see above)");
  }
  return total_failures == 0 ? 0 : 1;
}

}  // namespace mdtp::cli
