#pragma once
// Every operation of a Communicator on device tensors, against the serial result each rank can
// compute by itself.  Shared by the NCCL and staged-MPI tests.  Values are multiples of 1/4 below
// 16, exact in every dtype (bf16 included), so results must match exactly.
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "comm/communicator.hpp"
#include "cuda/cuda_backend.hpp"

namespace mdtp::gpu_test {

inline double value_of(int rank, std::int64_t i) { return (rank + 1) * 0.5 + static_cast<double>(i % 7) * 0.25; }

inline std::vector<double> values_of(int rank, std::int64_t n, std::int64_t offset = 0) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value_of(rank, offset + i);
  return v;
}

inline void check_collectives(Communicator& comm, const CudaBackend& dev, DType dt) {
  INFO("group '" << comm.name() << "' (" << comm.backend_name() << "), " << dtype_name(dt) << ", rank " << comm.rank()
                 << " of " << comm.size());
  const int r = comm.rank(), p = comm.size();
  const std::int64_t n = 3 * 5;
  auto make = [&](std::vector<double> v, Shape shape) { return dev.from_f64(v, shape, dt, MemCategory::communication); };

  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
    Tensor buf = make(values_of(r, n), {3, 5});
    comm.all_reduce(buf, op);
    std::vector<double> expected(n);
    for (std::int64_t i = 0; i < n; ++i) {
      double s = 0.0;
      for (int q = 0; q < p; ++q) s += value_of(q, i);
      expected[i] = op == ReduceOp::sum ? s : op == ReduceOp::max ? value_of(p - 1, i) : value_of(0, i);
    }
    INFO(reduce_op_name(op));
    CHECK(dev.to_f64(buf) == expected);
  }
  {
    Tensor shard = make(values_of(r, n), {3, 5});
    Tensor gathered = dev.zeros({3 * p, 5}, dt, MemCategory::communication);
    comm.all_gather(shard, gathered);
    std::vector<double> expected;
    for (int q = 0; q < p; ++q) {
      auto v = values_of(q, n);
      expected.insert(expected.end(), v.begin(), v.end());
    }
    CHECK(dev.to_f64(gathered) == expected);
  }
  {
    Tensor full = make(values_of(r, 2 * 3 * p), {2 * p, 3});
    Tensor shard = dev.zeros({2, 3}, dt, MemCategory::communication);
    comm.reduce_scatter(full, shard);
    std::vector<double> expected(6, 0.0);
    for (int q = 0; q < p; ++q)
      for (std::int64_t i = 0; i < 6; ++i) expected[i] += value_of(q, r * 6 + i);
    CHECK(dev.to_f64(shard) == expected);
  }
  {
    const int root = p - 1;
    Tensor buf = make(values_of(r, n), {n});
    comm.broadcast(buf, root);
    CHECK(dev.to_f64(buf) == values_of(root, n));
  }
  {
    Tensor in = make(values_of(r, n), {n});
    Tensor out = r == 0 ? dev.zeros({n}, dt, MemCategory::communication) : Tensor();
    comm.reduce(in, out, 0);
    if (r == 0) {
      std::vector<double> expected(n, 0.0);
      for (int q = 0; q < p; ++q)
        for (std::int64_t i = 0; i < n; ++i) expected[i] += value_of(q, i);
      CHECK(dev.to_f64(out) == expected);
    }
  }
  {
    // A ring shift, blocking and non-blocking: each rank gets its predecessor's values.
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    Tensor out = make(values_of(r, n), {n});
    Tensor in = dev.zeros({n}, dt, MemCategory::communication);
    comm.sendrecv(out, next, in, prev);
    CHECK(dev.to_f64(in) == values_of(prev, n));
    Tensor in2 = dev.zeros({n}, dt, MemCategory::communication);
    CommHandle received = comm.irecv(in2, prev, 3);
    CommHandle sent = comm.isend(out, next, 3);
    received.wait();
    sent.wait();
    CHECK(dev.to_f64(in2) == values_of(prev, n));
  }
  {
    Tensor buf = make(values_of(r, n), {n});
    CommHandle h = comm.iall_reduce(buf);
    while (!h.test()) {
    }
    std::vector<double> expected(n, 0.0);
    for (int q = 0; q < p; ++q)
      for (std::int64_t i = 0; i < n; ++i) expected[i] += value_of(q, i);
    CHECK(dev.to_f64(buf) == expected);
  }
  comm.barrier();
}

// Ends the process with a message if it is still alive `seconds` after construction and before
// destruction: a refused operation that left a receive posted hangs where it should throw, and
// the test should say so at once rather than when ctest's timeout kills it.
class Watchdog {
 public:
  Watchdog(std::string what, int seconds)
      : thread_([this, what = std::move(what), seconds] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return done_; })) return;
          std::fprintf(stderr, "FAILED: %s did not return within %d s\n", what.c_str(), seconds);
          std::fflush(stderr);
          std::_Exit(1);
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

// A sendrecv, isend or irecv with a host buffer on either side must be refused during validation,
// on every rank alike, and start nothing: the receive of a refused sendrecv is never posted (if it
// were, unwinding would wait for it forever).  A ring shift afterwards must then get exactly its
// own data, which a stale posted receive would have taken.  `refusal` is part of the message.
inline void check_refused_sendrecv(Communicator& comm, const CudaBackend& dev, const char* refusal) {
  INFO("group '" << comm.name() << "' (" << comm.backend_name() << "), rank " << comm.rank() << " of " << comm.size());
  const int r = comm.rank(), p = comm.size();
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  const std::int64_t n = 9;
  auto host = make_host_backend();
  Tensor host_buf = host->from_f64(values_of(r, n), {n}, DType::f32, MemCategory::communication);
  Tensor out = dev.from_f64(values_of(r, n), {n}, DType::f32, MemCategory::communication);
  Tensor in = dev.zeros({n}, DType::f32, MemCategory::communication);
  {
    Watchdog watchdog("a refused sendrecv on group '" + comm.name() + "'", 30);
    CHECK_THROWS_WITH(comm.sendrecv(host_buf, next, in, prev), Catch::Contains(refusal) && Catch::Contains("sendrecv out lives on host"));
    CHECK_THROWS_WITH(comm.sendrecv(out, next, host_buf, prev), Catch::Contains(refusal) && Catch::Contains("sendrecv in lives on host"));
    CHECK_THROWS_WITH(comm.isend(host_buf, next), Catch::Contains(refusal));
    CHECK_THROWS_WITH(comm.irecv(host_buf, prev), Catch::Contains(refusal));
    comm.sendrecv(out, next, in, prev);
  }
  CHECK(dev.to_f64(in) == values_of(prev, n));
}

// What the ledger must hold after check_collectives: 13 entries, each with a plausible time.
inline void check_ledger_after_collectives(const CommLedger& ledger, std::size_t first) {
  const auto& entries = ledger.entries();
  REQUIRE(entries.size() - first == 13);
  for (std::size_t i = first; i < entries.size(); ++i) {
    CHECK(std::isfinite(entries[i].seconds));
    CHECK(entries[i].seconds >= 0.0);
  }
  CHECK(entries[first].op == CollectiveOp::all_reduce);
  CHECK(entries.back().op == CollectiveOp::barrier);
}

}  // namespace mdtp::gpu_test
