// A user's own experiment, written against an installed mdtp: a 2D (SUMMA) Linear on a 2×2 grid,
// one forward and backward, and the ledger's bytes per (phase, group, op) held against the cost
// model's exact plan.  Prints one line and exits 0 when they agree.  Run under 4 MPI ranks.
#include <mpi.h>

#include <cstdio>
#include <map>

#include "comm/ledger.hpp"
#include "cost/cost_model.hpp"
#include "mesh/mesh.hpp"
#include "modes/registry.hpp"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int status = 0;
  try {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    mdtp::require(world == 4, "the consumer experiment runs on 4 ranks; got ", world);
    mdtp::MeshConfig config;
    config.world = 4;
    config.tp = 4;
    config.tp_mode = mdtp::TpMode::d2;
    mdtp::CommLedger ledger;
    mdtp::Mesh mesh(config, MPI_COMM_WORLD, ledger);
    auto backend = mdtp::make_host_backend();
    auto mode = mdtp::make_tp_mode(mdtp::TpMode::d2, mdtp::TpContext{mesh, *backend, mdtp::DType::f64, 7, {}});
    auto linear = mode->linear(mdtp::LinearSpec{"demo", 8, 12}, mode->residual_layout());
    mdtp::Tensor x = backend->zeros({8 / 2, 8 / 2}, mdtp::DType::f64, mdtp::MemCategory::activations);
    {
      mdtp::PhaseScope phase(ledger, "forward");
      mdtp::LinearSaved saved;  // this micro-batch's state, owned by the caller
      mdtp::Tensor y = linear->forward(x, saved);
      mdtp::PhaseScope back(ledger, "backward");
      linear->backward(y, saved);
      mdtp::PhaseScope sync(ledger, "grad-sync");
      mdtp::reduce_gradients(linear->parameters(), mesh, *backend);
    }
    mdtp::cost::Workload w;
    w.mode = mdtp::TpMode::d2;
    w.mesh = config;
    w.layer = "linear";
    w.rows = 8;
    w.hidden = 8;
    w.ffn_hidden = 12;
    w.dtype = mdtp::DType::f64;
    const auto model = mdtp::cost::summarize(mdtp::cost::plan_step(w));
    const auto measured = ledger.summary();
    bool equal = model.size() == measured.size();
    for (const auto& [key, totals] : model)
      equal = equal && measured.count(key) && measured.at(key).logical_bytes == totals.logical_bytes;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
      std::printf("consumer experiment: %zu (phase, group, op) keys, ledger bytes %s the cost model\n", model.size(),
                  equal ? "equal" : "DIFFER FROM");
    status = equal ? 0 : 1;
  } catch (const mdtp::Error& e) {
    std::fprintf(stderr, "consumer experiment: error: %s\n", e.what());
    status = 2;
  }
  MPI_Finalize();
  return status;
}
