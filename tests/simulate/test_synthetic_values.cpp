// Synthetic values (`mdtp simulate --values synthetic`, docs/simulate.md), without SimGrid: the
// synthetic allocator (model tensors alias one arena and are accounted to the byte; MemCategory::
// other keeps real, separate storage), the charging backend over it (a kernel into a synthetic
// tensor is charged exactly as with values and not run), and mdtp's ring collectives on synthetic
// tensors over MPI (the same messages and ledger as with values, no arithmetic), on 1 and 3 ranks.
#include <mpi.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <tuple>

#include "comm/ledger.hpp"
#include "comm/mpi_communicator.hpp"
#include "cost/cluster.hpp"
#include "cost/kernel_time.hpp"
#include "simulate/charging_backend.hpp"
#include "simulate/synthetic_allocator.hpp"

using namespace mdtp;

namespace {

std::shared_ptr<simulate::SyntheticAllocator> synthetic_allocator() {
  return std::make_shared<simulate::SyntheticAllocator>();
}

// Every float of a tensor's storage set to `x` through its pointer (what a kernel would write).
void poke(const Tensor& t, float x) {
  auto* p = static_cast<float*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = x;
}

bool all_equal(const Tensor& t, float x) {
  const auto* p = static_cast<const float*>(t.raw_data());
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (p[i] != x) return false;
  return true;
}

}  // namespace

TEST_CASE("synthetic tensors alias one arena and are accounted to the byte; 'other' keeps its values",
          "[simulate][synthetic]") {
  auto allocator = synthetic_allocator();
  const auto backend = make_host_backend(allocator);
  CHECK(backend->synthetic_values());
  CHECK_FALSE(make_host_backend()->synthetic_values());
  for (MemCategory c : {MemCategory::parameters, MemCategory::gradients, MemCategory::optimizer_state,
                        MemCategory::master_weights, MemCategory::activations, MemCategory::communication,
                        MemCategory::workspace})
    CHECK_FALSE(allocator->holds_values(c));
  CHECK(allocator->holds_values(MemCategory::other));

  const std::int64_t before = allocator->tracker().current_total();
  {
    const Tensor w = backend->empty({3001, 7}, DType::f32, MemCategory::parameters);
    const Tensor x = backend->empty({129, 33}, DType::bf16, MemCategory::activations);
    CHECK_FALSE(w.holds_values());
    // One rank's tensors never overlap (the engine's aliasing checks hold); another allocator (a
    // second simulated rank) reuses the same addresses.
    const auto* wp = static_cast<const char*>(w.raw_data());
    const auto* xp = static_cast<const char*>(x.raw_data());
    CHECK((xp >= wp + w.bytes() || xp + x.bytes() <= wp));
    const auto other_rank = make_host_backend(synthetic_allocator());
    const Tensor w2 = other_rank->empty({3001, 7}, DType::f32, MemCategory::parameters);
    CHECK(w2.raw_data() == w.raw_data());
    CHECK(allocator->tracker().current(MemCategory::parameters) == 3001 * 7 * 4);
    CHECK(allocator->tracker().current(MemCategory::activations) == 129 * 33 * 2);
    CHECK(simulate::synthetic_arena_bytes() >= 3001 * 7 * 4);
    // A larger tensor than the arena holds grows it; the old storage stays mapped.
    const std::size_t grown = simulate::synthetic_arena_bytes() + 1;
    const Tensor big = backend->empty({static_cast<std::int64_t>(grown / 2 + 1)}, DType::bf16, MemCategory::gradients);
    CHECK(simulate::synthetic_arena_bytes() >= grown);
    poke(w, 2.0f);  // the old region is still writable
    // The small figures a run reduces and reports keep their values, in storage of their own.
    const Tensor loss = backend->from_f64({1.5, -2.25}, {2}, DType::f64, MemCategory::other);
    CHECK(loss.holds_values());
    CHECK(loss.raw_data() != w.raw_data());
    CHECK(backend->to_f64(loss) == std::vector<double>{1.5, -2.25});
  }
  CHECK(allocator->tracker().current_total() == before);  // every byte released in the accounts
}

TEST_CASE("a kernel into a synthetic tensor is charged as with values and not run", "[simulate][synthetic]") {
  const cost::Cluster h100 = cost::load_cluster(cost::find_cluster("dgx-h100"));
  double charged = 0.0;
  simulate::ChargingBackend be(make_host_backend(synthetic_allocator()), h100, [&](double s) { charged += s; });
  const std::int64_t m = 1024, k = 2048, n = 1536;  // 6.4 GFLOP: not run here
  const Tensor a = be.empty({m, k}, DType::f32, MemCategory::activations);
  const Tensor b = be.empty({k, n}, DType::f32, MemCategory::parameters);
  Tensor c = be.empty({m, n}, DType::f32, MemCategory::activations);
  poke(c, 1.0f);  // a GEMM that ran would overwrite it
  be.gemm(false, false, 1.0, a, b, 0.0, c);
  CHECK(charged == Approx(cost::gemm_kernel_seconds(m, n, k, DType::f32, h100)).epsilon(1e-12));
  CHECK(all_equal(c, 1.0f));
  const double after_gemm = charged;
  be.fill(c, 3.0);
  CHECK(charged - after_gemm == Approx(cost::stream_seconds(static_cast<double>(c.bytes()), h100)).epsilon(1e-12));
  CHECK(all_equal(c, 1.0f));
  // Reads of a synthetic tensor give zeros; writes to it are dropped; its sum of squares is 0.
  Tensor row = be.empty({3}, DType::f32, MemCategory::activations);
  be.assign_f64(row, {4.0, 5.0, 6.0});
  CHECK(be.to_f64(row) == std::vector<double>{0.0, 0.0, 0.0});
  CHECK(be.sum_squares(c) == 0.0);
  // A kernel whose output holds values still runs.
  Tensor kept = be.from_f64({1.0, 2.0}, {2}, DType::f64, MemCategory::other);
  be.scale(kept, 3.0);
  CHECK(be.to_f64(kept) == std::vector<double>{3.0, 6.0});
}

TEST_CASE("ring collectives on synthetic tensors move the same messages, without the arithmetic",
          "[simulate][synthetic][mpi]") {
  setenv("MDTP_COLLECTIVES", "ring", 1);  // the SMPI build's rings, here over the real MPI
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const auto real = make_host_backend();
  const auto synthetic = make_host_backend(synthetic_allocator());
  const std::int64_t rows = 5 * world + 2;  // not a multiple of the ring's blocks
  auto run = [&](const Backend& be) {
    CommLedger ledger;
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    const auto comm = make_mpi_communicator("world", dup, &ledger, WaitPolicy::library);
    Tensor x = be.zeros({rows * world, 3}, DType::f32, MemCategory::communication);
    Tensor shard = be.zeros({rows, 3}, DType::f32, MemCategory::communication);
    comm->all_reduce(x);
    comm->reduce_scatter(x, shard);
    comm->all_gather(shard, x);
    comm->broadcast(x, world - 1);
    Tensor out = be.zeros({rows * world, 3}, DType::f32, MemCategory::communication);
    comm->reduce(x, out, 0);
    std::vector<std::tuple<CollectiveOp, std::int64_t, double>> seen;
    for (const LedgerEntry& e : ledger.entries()) seen.emplace_back(e.op, e.logical_bytes, e.bus_bytes);
    return seen;
  };
  const auto with_values = run(*real);
  const auto without = run(*synthetic);
  REQUIRE(with_values.size() == 5);
  CHECK(without == with_values);
  unsetenv("MDTP_COLLECTIVES");
}
