// The MPI communicator's ledger entries, its refusals, the wait policy, and the cross-rank
// ledger statistics.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <optional>

#include "comm/ledger_stats.hpp"
#include "comm_test_groups.hpp"

using namespace mdtp;
using namespace mdtp::test;

namespace {

// Sets MDTP_WAIT for a scope and restores what was there.
class ScopedWaitEnv {
 public:
  explicit ScopedWaitEnv(const char* value) {
    if (const char* old = std::getenv("MDTP_WAIT")) previous_ = old;
    if (value) setenv("MDTP_WAIT", value, 1);
    else unsetenv("MDTP_WAIT");
  }
  ~ScopedWaitEnv() {
    if (previous_) setenv("MDTP_WAIT", previous_->c_str(), 1);
    else unsetenv("MDTP_WAIT");
  }

 private:
  std::optional<std::string> previous_;
};

}  // namespace

TEST_CASE("wait policy: MDTP_WAIT and node occupancy", "[comm][wait]") {
  const NodeOccupancy crowded{8, 2}, roomy{2, 8}, exact{4, 4};
  {
    ScopedWaitEnv env(nullptr);
    CHECK(resolve_wait_policy(crowded) == WaitPolicy::polite);
    CHECK(resolve_wait_policy(roomy) == WaitPolicy::library);
    CHECK(resolve_wait_policy(exact) == WaitPolicy::library);
  }
  {
    ScopedWaitEnv env("auto");
    CHECK(resolve_wait_policy(crowded) == WaitPolicy::polite);
    CHECK(resolve_wait_policy(roomy) == WaitPolicy::library);
  }
  {
    ScopedWaitEnv env("");
    CHECK(resolve_wait_policy(crowded) == WaitPolicy::polite);
  }
  {
    ScopedWaitEnv env("polite");
    CHECK(resolve_wait_policy(roomy) == WaitPolicy::polite);
  }
  {
    ScopedWaitEnv env("library");
    CHECK(resolve_wait_policy(crowded) == WaitPolicy::library);
  }
  {
    ScopedWaitEnv env("spin");
    CHECK_THROWS_WITH(resolve_wait_policy(crowded),
                      Catch::Contains("MDTP_WAIT='spin' is not a wait policy; expected polite, library or auto"));
  }
  CHECK(std::string(wait_policy_name(WaitPolicy::polite)) == "polite");
  CHECK(std::string(wait_policy_name(WaitPolicy::library)) == "library");
  CHECK(crowded.oversubscription() == 4.0);

  // One node here: every rank of the world is local, and at least one core is usable.
  NodeOccupancy here = measure_node_occupancy(MPI_COMM_WORLD);
  CHECK(here.local_ranks == world_size());
  CHECK(here.cores >= 1);
}

TEST_CASE("MPI communicator ledger entries: bytes, group, phase", "[comm][mpi][ledger]") {
  auto b = make_host_backend();
  const int n = world_size(), me = world_rank();
  CommLedger ledger;
  auto comm = make_mpi_communicator("world", MPI_COMM_WORLD, &ledger, test_wait_policy());
  auto t = [&](const Shape& s, DType d) { return b->zeros(s, d, MemCategory::communication); };

  Tensor buf = t({7, 5}, DType::f64), shard = t({7, 5}, DType::f32), full = t({7 * n, 5}, DType::f32);
  {
    PhaseScope outer(ledger, "forward");
    comm->all_reduce(buf);  // 35 f64
    {
      PhaseScope inner(ledger, "forward.mlp");
      comm->all_gather(shard, full);  // 35n f32
      CommHandle h = comm->ireduce_scatter(full, shard);  // 35n f32, recorded at wait
      CHECK(ledger.entries().size() == 2);
      h.wait();
    }
    comm->broadcast(buf, n - 1);  // 35 f64
    Tensor none;
    comm->reduce(shard, me == 0 ? shard : none, 0);  // 35 f32, in place on the root
    Tensor in = t({7, 5}, DType::f64);
    comm->sendrecv(buf, (me + 1) % n, in, (me + n - 1) % n);  // a recv and a send, 35 f64 each
  }
  comm->barrier();

  struct Expect {
    CollectiveOp op;
    double bytes;
    std::string phase;
  };
  const double r = 35 * 8, s = 35 * 4;
  const std::vector<Expect> expected = {
      {CollectiveOp::all_reduce, r, "forward"},         {CollectiveOp::all_gather, s * n, "forward.mlp"},
      {CollectiveOp::reduce_scatter, s * n, "forward.mlp"}, {CollectiveOp::broadcast, r, "forward"},
      {CollectiveOp::reduce, s, "forward"},             {CollectiveOp::send, r, "forward"},
      {CollectiveOp::recv, r, "forward"},               {CollectiveOp::barrier, 0, ""}};
  const double factors[] = {2.0 * (n - 1) / n, 1.0 * (n - 1) / n, 1.0 * (n - 1) / n, 1, 1, 1, 1, 0};
  REQUIRE(ledger.entries().size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = ledger.entries()[i];
    INFO("entry " << i << ": " << collective_name(e.op));
    CHECK(e.op == expected[i].op);
    CHECK(e.logical_bytes == static_cast<std::int64_t>(expected[i].bytes));
    CHECK(e.bus_bytes == Approx(expected[i].bytes * factors[i]));
    CHECK(e.phase == expected[i].phase);
    CHECK(e.group == "world");
    CHECK(e.group_size == n);
    CHECK(e.seconds >= 0.0);
  }
}

TEST_CASE("MPI communicator refuses what MPI cannot carry, before any MPI call", "[comm][mpi][validation]") {
  auto b = make_host_backend();
  const int n = world_size();
  CommLedger ledger;
  auto comm = make_mpi_communicator("tp", MPI_COMM_WORLD, &ledger, test_wait_policy());
  // A refused send buffer must not leave sendrecv's receive posted (it would wait forever).
  Tensor undefined;
  Tensor received = b->zeros({4}, DType::f32, MemCategory::communication);
  CHECK_THROWS_WITH(comm->sendrecv(undefined, (world_rank() + 1) % n, received, (world_rank() + n - 1) % n),
                    Catch::Contains("sendrecv on group 'tp': out is an undefined tensor"));
  Tensor x = b->zeros({5, 3}, DType::f64, MemCategory::communication);
  Tensor wrong = b->zeros({5 * n + 1, 3}, DType::f64, MemCategory::communication);
  CHECK_THROWS_WITH(comm->all_gather(x, wrong), Catch::Contains("expected [" + std::to_string(5 * n) + ", 3]"));
  CHECK_THROWS_WITH(comm->broadcast(x, n), Catch::Contains("got root=" + std::to_string(n)));
  CHECK_THROWS_WITH(make_mpi_communicator("pp", MPI_COMM_NULL, &ledger, WaitPolicy::polite),
                    Catch::Contains("make_mpi_communicator('pp') got MPI_COMM_NULL"));
  CHECK(ledger.entries().empty());
  // Nothing was started on any rank: the next collective matches up and is correct.
  b->fill(x, 1.0);
  comm->all_reduce(x);
  CHECK(b->to_f64(x) == std::vector<double>(15, static_cast<double>(n)));
  CHECK(ledger.entries().size() == 1);
}

TEST_CASE("a message of the wrong size is an error on the receiver", "[comm][mpi][validation]") {
  auto b = make_host_backend();
  const int n = world_size(), me = world_rank();
  CommLedger ledger;
  auto comm = make_mpi_communicator("pp", MPI_COMM_WORLD, &ledger, test_wait_policy());
  Tensor out = b->zeros({3}, DType::f32, MemCategory::communication);
  Tensor in = b->zeros({5}, DType::f32, MemCategory::communication);
  const int src = (me + n - 1) % n;
  CHECK_THROWS_WITH(comm->sendrecv(out, (me + 1) % n, in, src, 3),
                    Catch::Contains("recv on group 'pp' from peer " + std::to_string(src) +
                                    " expected 5 elements but the message held 3"));
  REQUIRE(ledger.entries().size() == 1);  // the send completed and was recorded; the recv failed
  CHECK(ledger.entries()[0].op == CollectiveOp::send);
}

TEST_CASE("ledger statistics over ranks: mean and max, keys missing on some ranks", "[comm][mpi][ledger]") {
  const int n = world_size(), me = world_rank();
  CommLedger ledger;
  // Rank r: r + 1 all-reduces of 10 f64 taking 0.5 s each in ("fwd", "tp").
  for (int i = 0; i <= me; ++i) {
    auto e = make_ledger_entry(CollectiveOp::all_reduce, "tp", 4, 10, DType::f64, "fwd");
    e.seconds = 0.5;
    ledger.record(e);
  }
  // Only rank 0: one broadcast in a phase and group nobody else has (long names on purpose).
  if (me == 0) {
    auto e = make_ledger_entry(CollectiveOp::broadcast, "pipeline.stage0.embedding", 2, 3, DType::f32,
                               "warmup.phase.with.a.long.name");
    e.seconds = 2.0;
    ledger.record(e);
  }
  // Only the last rank: an entry with no phase.
  if (me == n - 1) ledger.record(make_ledger_entry(CollectiveOp::send, "pp", 2, 7, DType::f32, ""));

  auto stats = reduce_ledger_stats(ledger, MPI_COMM_WORLD);
  REQUIRE(stats.size() == 3);
  // Ordered by (phase, group, op).
  CHECK(stats[0].key.phase.empty());
  CHECK(stats[0].key.group == "pp");
  CHECK(stats[0].key.op == CollectiveOp::send);
  CHECK(stats[0].ranks == 1);
  CHECK(stats[0].calls.mean == Approx(1.0 / n));
  CHECK(stats[0].calls.max == 1.0);
  CHECK(stats[0].logical_bytes.max == 28.0);

  const auto& ar = stats[1];
  CHECK(ar.key.phase == "fwd");
  CHECK(ar.key.group == "tp");
  CHECK(ar.key.op == CollectiveOp::all_reduce);
  CHECK(ar.ranks == n);
  CHECK(ar.group_size == 4);
  CHECK(ar.calls.mean == Approx((n + 1) / 2.0));
  CHECK(ar.calls.max == n);
  CHECK(ar.logical_bytes.mean == Approx(80.0 * (n + 1) / 2.0));
  CHECK(ar.logical_bytes.max == 80.0 * n);
  CHECK(ar.bus_bytes.mean == Approx(80.0 * 1.5 * (n + 1) / 2.0));
  CHECK(ar.bus_bytes.max == Approx(80.0 * 1.5 * n));
  CHECK(ar.seconds.mean == Approx(0.5 * (n + 1) / 2.0));
  CHECK(ar.seconds.max == Approx(0.5 * n));

  const auto& bc = stats[2];
  CHECK(bc.key.phase == "warmup.phase.with.a.long.name");
  CHECK(bc.key.group == "pipeline.stage0.embedding");
  CHECK(bc.ranks == 1);
  CHECK(bc.group_size == 2);
  CHECK(bc.calls.mean == Approx(1.0 / n));
  CHECK(bc.logical_bytes.mean == Approx(12.0 / n));
  CHECK(bc.logical_bytes.max == 12.0);
  CHECK(bc.seconds.mean == Approx(2.0 / n));
  CHECK(bc.seconds.max == 2.0);

  // An empty ledger on every rank gives an empty table.
  CommLedger empty;
  CHECK(reduce_ledger_stats(empty, MPI_COMM_WORLD).empty());
}
