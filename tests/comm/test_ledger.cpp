// The ledger and Communicator's validate-and-record layer, without MPI: a fake implementation
// counts the hooks it is asked to start, so the tests see exactly what reaches an
// implementation and what is recorded.  Bytes are computed here from the nccl-tests formulas
// (docs/theory.md §5), independently of ledger.cpp.
#include <catch2/catch.hpp>

#include "comm/communicator.hpp"
#include "core/backend.hpp"

using namespace mdtp;

namespace {

class FakePending final : public PendingOp {
 public:
  FakePending(int polls_needed, std::optional<double> device, int& waits)
      : polls_left_(polls_needed), device_(device), waits_(waits) {}
  void wait() override {
    ++waits_;
    polls_left_ = 0;
  }
  bool test() override { return polls_left_ == 0 || --polls_left_ == 0; }
  std::optional<double> device_seconds() const override { return device_; }

 private:
  int polls_left_;
  std::optional<double> device_;
  int& waits_;
};

class FakeCommunicator final : public Communicator {
 public:
  FakeCommunicator(std::string name, int rank, int size, CommLedger* ledger)
      : Communicator(std::move(name), rank, size, ledger) {}
  const char* backend_name() const override { return "fake"; }
  std::vector<int> world_ranks() const override {
    std::vector<int> r(static_cast<std::size_t>(size()));
    for (int i = 0; i < size(); ++i) r[static_cast<std::size_t>(i)] = i;
    return r;
  }
  int started = 0;  // start_* hooks called
  int waits = 0;    // PendingOp::wait calls
  int polls_needed = 0;
  std::optional<double> device;

 protected:
  std::unique_ptr<PendingOp> start() {
    ++started;
    return std::make_unique<FakePending>(polls_needed, device, waits);
  }
  std::unique_ptr<PendingOp> start_all_reduce(Tensor&, ReduceOp) override { return start(); }
  std::unique_ptr<PendingOp> start_all_gather(const Tensor&, Tensor&) override { return start(); }
  std::unique_ptr<PendingOp> start_reduce_scatter(const Tensor&, Tensor&, ReduceOp) override { return start(); }
  std::unique_ptr<PendingOp> start_broadcast(Tensor&, int) override { return start(); }
  std::unique_ptr<PendingOp> start_reduce(const Tensor&, Tensor&, int, ReduceOp) override { return start(); }
  std::unique_ptr<PendingOp> start_send(const Tensor&, int, int) override { return start(); }
  std::unique_ptr<PendingOp> start_recv(Tensor&, int, int) override { return start(); }
  std::unique_ptr<PendingOp> start_barrier() override { return start(); }
};

double expected_bus(CollectiveOp op, double logical, int n) {
  switch (op) {
    case CollectiveOp::all_reduce: return logical * 2.0 * (n - 1) / n;
    case CollectiveOp::all_gather:
    case CollectiveOp::reduce_scatter: return logical * (n - 1) / n;
    case CollectiveOp::barrier: return 0.0;
    default: return logical;
  }
}

}  // namespace

TEST_CASE("ledger entries follow the nccl-tests byte conventions", "[comm][ledger]") {
  CHECK(std::string(collective_name(CollectiveOp::reduce_scatter)) == "reduce_scatter");
  CHECK(std::string(collective_name(CollectiveOp::barrier)) == "barrier");
  for (int n : {1, 2, 3, 8, 27}) {
    CHECK(bus_factor(CollectiveOp::all_reduce, n) == Approx(2.0 * (n - 1) / n));
    CHECK(bus_factor(CollectiveOp::all_gather, n) == Approx(1.0 * (n - 1) / n));
    CHECK(bus_factor(CollectiveOp::reduce_scatter, n) == Approx(1.0 * (n - 1) / n));
    for (auto op : {CollectiveOp::broadcast, CollectiveOp::reduce, CollectiveOp::send, CollectiveOp::recv})
      CHECK(bus_factor(op, n) == 1.0);
    for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                    CollectiveOp::broadcast, CollectiveOp::reduce, CollectiveOp::send, CollectiveOp::recv}) {
      for (DType dtype : {DType::f32, DType::f64, DType::bf16}) {
        auto e = make_ledger_entry(op, "tp.row", n, 35, dtype, "fwd");
        const std::int64_t bytes = 35 * (dtype == DType::f64 ? 8 : dtype == DType::f32 ? 4 : 2);
        CHECK(e.logical_bytes == bytes);
        CHECK(e.bus_bytes == Approx(expected_bus(op, static_cast<double>(bytes), n)));
        CHECK(e.group == "tp.row");
        CHECK(e.group_size == n);
        CHECK(e.phase == "fwd");
        CHECK(e.seconds == 0.0);
      }
    }
    auto barrier = make_ledger_entry(CollectiveOp::barrier, "dp", n, 0, DType::f32, "");
    CHECK(barrier.logical_bytes == 0);
    CHECK(barrier.bus_bytes == 0.0);
  }
  CHECK_THROWS_WITH(bus_factor(CollectiveOp::all_reduce, 0), Catch::Contains("got group_size=0"));
  CHECK_THROWS_WITH(make_ledger_entry(CollectiveOp::send, "pp", 2, -3, DType::f32, ""),
                    Catch::Contains("got -3"));
}

TEST_CASE("ledger summary totals per (phase, group, op) and phase scopes nest", "[comm][ledger]") {
  CommLedger ledger;
  CHECK(ledger.phase().empty());
  {
    PhaseScope forward(ledger, "forward");
    CHECK(ledger.phase() == "forward");
    {
      PhaseScope inner(ledger, "forward.attn");
      CHECK(ledger.phase() == "forward.attn");
    }
    CHECK(ledger.phase() == "forward");
  }
  CHECK(ledger.phase().empty());

  auto add = [&](CollectiveOp op, const std::string& group, std::int64_t elements, double seconds) {
    auto e = make_ledger_entry(op, group, 4, elements, DType::f64, ledger.phase());
    e.seconds = seconds;
    ledger.record(e);
  };
  {
    PhaseScope p(ledger, "fwd");
    add(CollectiveOp::all_reduce, "tp", 10, 0.5);
    add(CollectiveOp::all_reduce, "tp", 30, 0.25);
    add(CollectiveOp::all_gather, "tp", 8, 1.0);
  }
  add(CollectiveOp::all_reduce, "tp", 5, 2.0);
  auto s = ledger.summary();
  REQUIRE(s.size() == 3);
  const auto& ar = s.at(LedgerKey{"fwd", "tp", CollectiveOp::all_reduce});
  CHECK(ar.calls == 2);
  CHECK(ar.logical_bytes == 40 * 8);
  CHECK(ar.bus_bytes == Approx(40 * 8 * 1.5));
  CHECK(ar.seconds == Approx(0.75));
  CHECK(ar.group_size == 4);
  CHECK(s.at(LedgerKey{"", "tp", CollectiveOp::all_reduce}).calls == 1);
  CHECK(s.at(LedgerKey{"fwd", "tp", CollectiveOp::all_gather}).logical_bytes == 64);
  ledger.clear();
  CHECK(ledger.entries().empty());
}

TEST_CASE("Communicator records one entry per call with the logical buffer's size", "[comm][ledger]") {
  auto b = make_host_backend();
  auto t = [&](const Shape& s, DType d = DType::f64) { return b->zeros(s, d, MemCategory::communication); };
  CommLedger ledger;
  FakeCommunicator comm("tp.col", 1, 4, &ledger);
  Tensor buf = t({7, 5}), shard = t({7, 5}), full = t({28, 5}), single = t({3}, DType::f32);

  struct Expect {
    CollectiveOp op;
    std::int64_t elements;
    DType dtype;
  };
  std::vector<Expect> expected;
  {
    PhaseScope phase(ledger, "bwd");
    comm.all_reduce(buf);
    expected.push_back({CollectiveOp::all_reduce, 35, DType::f64});
    comm.all_gather(shard, full);
    expected.push_back({CollectiveOp::all_gather, 140, DType::f64});
    comm.reduce_scatter(full, shard, ReduceOp::max);
    expected.push_back({CollectiveOp::reduce_scatter, 140, DType::f64});
    comm.broadcast(single, 3);
    expected.push_back({CollectiveOp::broadcast, 3, DType::f32});
    comm.reduce(buf, buf, 1);  // root: in place
    expected.push_back({CollectiveOp::reduce, 35, DType::f64});
    Tensor none;
    comm.reduce(single, none, 0);  // not the root: no output tensor needed
    expected.push_back({CollectiveOp::reduce, 3, DType::f32});
    comm.send(single, 0, 7);
    expected.push_back({CollectiveOp::send, 3, DType::f32});
    comm.recv(buf, 2);
    expected.push_back({CollectiveOp::recv, 35, DType::f64});
    comm.sendrecv(single, 2, buf, 0);
    expected.push_back({CollectiveOp::send, 3, DType::f32});  // recorded send, then recv
    expected.push_back({CollectiveOp::recv, 35, DType::f64});
    comm.barrier();
    expected.push_back({CollectiveOp::barrier, 0, DType::f32});
  }
  CHECK(comm.started == static_cast<int>(expected.size()));
  REQUIRE(ledger.entries().size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& e = ledger.entries()[i];
    INFO("entry " << i << " " << collective_name(e.op));
    CHECK(e.op == expected[i].op);
    CHECK(e.group == "tp.col");
    CHECK(e.group_size == 4);
    CHECK(e.phase == "bwd");
    CHECK(e.elements == expected[i].elements);
    CHECK(e.dtype == expected[i].dtype);
    const double bytes = static_cast<double>(expected[i].elements * static_cast<std::int64_t>(dtype_size(expected[i].dtype)));
    CHECK(e.logical_bytes == static_cast<std::int64_t>(bytes));
    CHECK(e.bus_bytes == Approx(expected_bus(e.op, bytes, 4)));
    CHECK(e.seconds >= 0.0);
  }
}

TEST_CASE("non-blocking calls are recorded once, when they complete", "[comm][ledger]") {
  auto b = make_host_backend();
  CommLedger ledger;
  FakeCommunicator comm("dp", 0, 2, &ledger);
  Tensor buf = b->zeros({4, 4}, DType::f32, MemCategory::communication);

  CommHandle h;
  {
    PhaseScope phase(ledger, "step");
    h = comm.iall_reduce(buf);
  }
  CHECK(h.active());
  CHECK(ledger.entries().empty());
  h.wait();
  CHECK_FALSE(h.active());
  REQUIRE(ledger.entries().size() == 1);
  CHECK(ledger.entries()[0].phase == "step");  // the phase at issue, not at wait
  h.wait();
  CHECK(h.test());
  CHECK(ledger.entries().size() == 1);

  // Polled to completion through test().
  comm.polls_needed = 3;
  CommHandle polled = comm.ibroadcast(buf, 1);
  int polls = 1;
  while (!polled.test()) ++polls;
  CHECK(polls == 3);
  CHECK(comm.waits == 2);  // the handle still calls wait() once after a successful test()
  CHECK(ledger.entries().size() == 2);
  comm.polls_needed = 0;

  // Destroyed without wait: waited and recorded by the destructor; a moved-from handle records
  // nothing; assigning over an active handle completes it first.
  { CommHandle dropped = comm.isend(buf, 1); }
  CHECK(ledger.entries().size() == 3);
  {
    CommHandle a = comm.irecv(buf, 1);
    CommHandle moved(std::move(a));
    CHECK_FALSE(a.active());
    CHECK(moved.active());
    moved = comm.isend(buf, 0);  // the recv completes here
    CHECK(ledger.entries().size() == 4);
    CHECK(ledger.entries().back().op == CollectiveOp::recv);
  }
  CHECK(ledger.entries().size() == 5);
  CHECK(ledger.entries().back().op == CollectiveOp::send);
  CHECK(comm.waits == comm.started);

  // Device time, when the implementation reports it, replaces the host clock.
  comm.device = 0.125;
  comm.all_reduce(buf);
  CHECK(ledger.entries().back().seconds == 0.125);
}

TEST_CASE("a null or disabled ledger records nothing", "[comm][ledger]") {
  auto b = make_host_backend();
  Tensor buf = b->zeros({3}, DType::f64, MemCategory::communication);
  FakeCommunicator unlogged("tp", 0, 2, nullptr);
  unlogged.all_reduce(buf);
  unlogged.barrier();
  CHECK(unlogged.started == 2);

  CommLedger ledger;
  FakeCommunicator comm("tp", 0, 2, &ledger);
  ledger.set_enabled(false);
  comm.all_reduce(buf);
  CommHandle h = comm.iall_reduce(buf);
  ledger.set_enabled(true);  // enabled again before the wait: still a warm-up call
  h.wait();
  CHECK(ledger.entries().empty());
  comm.all_reduce(buf);
  CHECK(ledger.entries().size() == 1);
}

TEST_CASE("bad arguments are refused before the implementation is called", "[comm][validation]") {
  auto b = make_host_backend();
  auto t = [&](const Shape& s, DType d = DType::f64) { return b->zeros(s, d, MemCategory::communication); };
  CommLedger ledger;
  FakeCommunicator comm("tp.row", 1, 4, &ledger);
  Tensor shard = t({7, 5}), undefined;

  Tensor short_gathered = t({27, 5});
  CHECK_THROWS_WITH(comm.all_gather(shard, short_gathered),
                    Catch::Contains("all_gather on group 'tp.row' of size 4") &&
                        Catch::Contains("gathered has shape [27, 5]; expected [28, 5]"));
  Tensor wide_gathered = t({28, 6});
  CHECK_THROWS_WITH(comm.iall_gather(shard, wide_gathered), Catch::Contains("expected [28, 5]"));
  Tensor f32_gathered = t({28, 5}, DType::f32);
  CHECK_THROWS_WITH(comm.all_gather(shard, f32_gathered),
                    Catch::Contains("shard is f64 but gathered is f32; expected the same dtype"));
  Tensor scalar = t({});
  Tensor gathered4 = t({4});
  CHECK_THROWS_WITH(comm.all_gather(scalar, gathered4), Catch::Contains("works along dimension 0"));
  Tensor big = t({28, 5});
  CHECK_THROWS_WITH(comm.all_gather(big.row_slice(0, 7), big),
                    Catch::Contains("not this rank's slot (rows 7..14)"));
  CHECK_NOTHROW(comm.all_gather(big.row_slice(7, 14), big));  // in place is fine
  const int accepted = 1;

  Tensor full = t({29, 5});
  CHECK_THROWS_WITH(comm.reduce_scatter(full, shard),
                    Catch::Contains("reduce_scatter on group 'tp.row' of size 4: full has shape [29, 5]; expected [28, 5]"));
  Tensor full_ok = t({28, 5});
  Tensor f32_shard = t({7, 5}, DType::f32);
  CHECK_THROWS_WITH(comm.ireduce_scatter(full_ok, f32_shard, ReduceOp::min), Catch::Contains("full is f64 but shard is f32"));
  Tensor inside = full_ok.row_slice(0, 7);
  CHECK_THROWS_WITH(comm.reduce_scatter(full_ok, inside), Catch::Contains("shard overlaps full"));

  CHECK_THROWS_WITH(comm.broadcast(shard, 4), Catch::Contains("broadcast on group 'tp.row' of size 4 needs a root in [0, 4); got root=4"));
  CHECK_THROWS_WITH(comm.ibroadcast(shard, -1), Catch::Contains("got root=-1"));
  CHECK_THROWS_WITH(comm.broadcast(undefined, 0), Catch::Contains("buffer is an undefined tensor"));
  CHECK_THROWS_WITH(comm.all_reduce(undefined), Catch::Contains("all_reduce on group 'tp.row': buffer is an undefined tensor"));

  CHECK_THROWS_WITH(comm.reduce(shard, undefined, 1), Catch::Contains("out (on the root) is an undefined tensor"));
  Tensor small_out = t({3});
  CHECK_THROWS_WITH(comm.reduce(shard, small_out, 1), Catch::Contains("out has shape [3] but in has shape [7, 5]"));
  CHECK_THROWS_WITH(comm.ireduce(shard, f32_shard, 1), Catch::Contains("in is f64 but out is f32"));
  CHECK_THROWS_WITH(comm.reduce(shard, shard, 9), Catch::Contains("got root=9"));

  CHECK_THROWS_WITH(comm.send(shard, 4), Catch::Contains("send on group 'tp.row' of size 4 needs a peer in [0, 4); got peer=4"));
  CHECK_THROWS_WITH(comm.irecv(shard, -2), Catch::Contains("got peer=-2"));
  CHECK_THROWS_WITH(comm.send(shard, 0, -1), Catch::Contains("tag must be non-negative; got tag=-1"));
  Tensor in = t({7, 5});
  CHECK_THROWS_WITH(comm.sendrecv(shard, 0, in, 5), Catch::Contains("needs a src in [0, 4); got src=5"));
  CHECK_THROWS_WITH(comm.sendrecv(shard, 0, shard, 0), Catch::Contains("in overlaps out"));

  CHECK(comm.started == accepted);  // only the in-place all_gather reached the implementation
  CHECK(ledger.entries().size() == static_cast<std::size_t>(accepted));
}
