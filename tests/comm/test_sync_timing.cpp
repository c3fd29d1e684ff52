// Sync timing (comm/ledger.hpp): a blocking collective waits at a barrier on its group first; the
// barrier's time is the entry's wait, the collective's own time its seconds.  Held here on the MPI
// communicator: a rank that arrives 50 ms late shows up as wait on the others and not as their
// transfer; the mode changes no entry's bytes and adds no entry; point-to-point and non-blocking
// calls are left unsynchronised; MDTP_SYNC_TIMING is parsed strictly.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include "comm_test_groups.hpp"

using namespace mdtp;
using namespace mdtp::test;

namespace {

class ScopedSyncEnv {
 public:
  explicit ScopedSyncEnv(const char* value) {
    if (const char* old = std::getenv("MDTP_SYNC_TIMING")) previous_ = old;
    if (value) setenv("MDTP_SYNC_TIMING", value, 1);
    else unsetenv("MDTP_SYNC_TIMING");
  }
  ~ScopedSyncEnv() {
    if (previous_) setenv("MDTP_SYNC_TIMING", previous_->c_str(), 1);
    else unsetenv("MDTP_SYNC_TIMING");
  }

 private:
  std::optional<std::string> previous_;
};

// Every blocking collective once, then a send/recv ring shift and a non-blocking all-reduce.
void issue_calls(Communicator& comm, Backend& b) {
  const int n = comm.size(), r = comm.rank();
  Tensor buf = b.zeros({6, 4}, DType::f32, MemCategory::communication);
  Tensor shard = b.zeros({2, 4}, DType::f32, MemCategory::communication);
  Tensor full = b.zeros({2 * n, 4}, DType::f32, MemCategory::communication);
  Tensor out = b.zeros({6, 4}, DType::f32, MemCategory::communication);
  Tensor in = b.zeros({6, 4}, DType::f32, MemCategory::communication);
  {
    PhaseScope phase(*comm.ledger(), "forward");
    comm.all_reduce(buf);
    comm.all_gather(shard, full);
    comm.reduce_scatter(full, shard);
    comm.broadcast(buf, 0);
    comm.reduce(buf, out, 0);
  }
  PhaseScope phase(*comm.ledger(), "backward");
  comm.sendrecv(buf, (r + 1) % n, in, (r + n - 1) % n);
  comm.iall_reduce(buf).wait();
}

bool blocking_collective(CollectiveOp op) {
  return op == CollectiveOp::all_reduce || op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter ||
         op == CollectiveOp::broadcast || op == CollectiveOp::reduce;
}

}  // namespace

TEST_CASE("MDTP_SYNC_TIMING switches sync timing and refuses other values", "[comm][sync]") {
  {
    ScopedSyncEnv env(nullptr);
    CHECK_FALSE(sync_timing_from_environment());
  }
  {
    ScopedSyncEnv env("");
    CHECK_FALSE(sync_timing_from_environment());
  }
  {
    ScopedSyncEnv env("0");
    CHECK_FALSE(sync_timing_from_environment());
  }
  {
    ScopedSyncEnv env("1");
    CHECK(sync_timing_from_environment());
  }
  {
    ScopedSyncEnv env("yes");
    CHECK_THROWS_WITH(sync_timing_from_environment(),
                      Catch::Contains("MDTP_SYNC_TIMING='yes' is not a switch; expected 0 or 1"));
  }
}

TEST_CASE("sync timing: same entries and bytes, wait and transfer apart on blocking collectives", "[comm][sync]") {
  auto b = make_host_backend();
  CommLedger plain, synced;
  synced.set_sync_timing(true);
  auto plain_comm = make_mpi_communicator("world", MPI_COMM_WORLD, &plain, test_wait_policy());
  auto synced_comm = make_mpi_communicator("world", MPI_COMM_WORLD, &synced, test_wait_policy());
  issue_calls(*plain_comm, *b);
  issue_calls(*synced_comm, *b);

  // The barrier is not an entry: the same calls, in the same order, with the same bytes.
  REQUIRE(synced.entries().size() == plain.entries().size());
  REQUIRE(synced.entries().size() == 8u);  // 5 collectives, send + recv, the non-blocking all-reduce
  for (std::size_t i = 0; i < plain.entries().size(); ++i) {
    const LedgerEntry& p = plain.entries()[i];
    const LedgerEntry& s = synced.entries()[i];
    INFO("entry " << i << " " << collective_name(s.op));
    CHECK(s.op == p.op);
    CHECK(s.phase == p.phase);
    CHECK(s.logical_bytes == p.logical_bytes);
    CHECK(s.bus_bytes == p.bus_bytes);
    CHECK_FALSE(p.synchronised);
    CHECK(p.wait_seconds == 0.0);
    CHECK(s.seconds >= 0.0);
    CHECK(s.wait_seconds >= 0.0);
    CHECK(s.arrived > 0.0);
    // Only the blocking collectives are synchronised: the ring shift's pair and the non-blocking
    // all-reduce keep issue → completion (i == 7 is the non-blocking one).
    const bool expect_synchronised = blocking_collective(s.op) && i < 7;
    CHECK(s.synchronised == expect_synchronised);
    if (!s.synchronised) CHECK(s.wait_seconds == 0.0);
  }
  CHECK(synced.entries().back().op == CollectiveOp::all_reduce);
  CHECK_FALSE(synced.entries().back().synchronised);
  // Arrivals are on one steady clock, in issue order for the blocking calls (entries are in
  // completion order: the ring shift's send is recorded before its receive, posted first).
  for (std::size_t i = 1; i < 5; ++i) CHECK(synced.entries()[i].arrived >= synced.entries()[i - 1].arrived);
  CHECK(synced.entries()[6].arrived <= synced.entries()[5].arrived);  // the receive was posted first

  // Per-key totals keep the bytes; the synchronised calls are counted.
  const auto ps = plain.summary(), ss = synced.summary();
  REQUIRE(ps.size() == ss.size());
  for (const auto& [key, t] : ps) {
    REQUIRE(ss.count(key) == 1);
    CHECK(ss.at(key).calls == t.calls);
    CHECK(ss.at(key).logical_bytes == t.logical_bytes);
    CHECK(ss.at(key).synchronised_calls == (blocking_collective(key.op) && key.phase == "forward" ? t.calls : 0));
  }
}

TEST_CASE("sync timing: a late rank is the others' wait, not their transfer", "[comm][sync]") {
  auto b = make_host_backend();
  CommLedger ledger;
  ledger.set_sync_timing(true);
  auto comm = make_mpi_communicator("world", MPI_COMM_WORLD, &ledger, test_wait_policy());
  Tensor buf = b->zeros({1024}, DType::f32, MemCategory::communication);
  const int late = comm->size() - 1;
  // A long delay against bounds at half of it: on an oversubscribed CI machine a polite wait can
  // lose its core for tens of milliseconds, which must not decide the test.
  constexpr double kSleep = 1.0;
  if (comm->rank() == late) std::this_thread::sleep_for(std::chrono::duration<double>(kSleep));
  comm->all_reduce(buf);
  REQUIRE(ledger.entries().size() == 1u);
  const LedgerEntry& e = ledger.entries().front();
  CHECK(e.synchronised);
  INFO("rank " << comm->rank() << ": wait " << e.wait_seconds << " s, transfer " << e.seconds << " s");
  if (comm->rank() != late) {
    // Everyone else arrived ~1 s before the late rank: that is wait, and the transfer of a
    // 4 KiB all-reduce once all are there is far shorter.
    CHECK(e.wait_seconds >= 0.5 * kSleep);
    CHECK(e.seconds < e.wait_seconds);
  }
  CHECK(e.seconds < 0.5 * kSleep);  // the late rank's sleep is nobody's transfer, its own included

  // Without sync timing the same delay lands in the others' seconds (issue to completion).
  CommLedger plain;
  auto plain_comm = make_mpi_communicator("world", MPI_COMM_WORLD, &plain, test_wait_policy());
  if (plain_comm->rank() == late) std::this_thread::sleep_for(std::chrono::duration<double>(kSleep));
  plain_comm->all_reduce(buf);
  REQUIRE(plain.entries().size() == 1u);
  CHECK(plain.entries().front().wait_seconds == 0.0);
  if (plain_comm->rank() != late) CHECK(plain.entries().front().seconds >= 0.5 * kSleep);
}
