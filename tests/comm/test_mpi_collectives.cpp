// Every MPI collective, blocking and non-blocking, against a serial computation of its result on
// sub-groups of several shapes.  Groups are created once per test case: on an oversubscribed
// node each MPI_Comm_split spins for a good fraction of a second at 27 ranks.
// Roots, shapes, dtypes and blocking/non-blocking rotate together over the cases, so that every
// root and every combination's parts are covered without multiplying the run time.
#include <catch2/catch.hpp>

#include "comm/ring_collectives.hpp"
#include "comm_test_groups.hpp"

using namespace mdtp;
using namespace mdtp::test;

namespace {

constexpr double kSentinel = -9999.0;
const DType kDTypes[] = {DType::f64, DType::f32};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::min};

Tensor make(const Backend& b, const std::vector<double>& v, const Shape& shape, DType dtype) {
  return b.from_f64(v, shape, dtype, MemCategory::communication);
}

Tensor filled(const Backend& b, const Shape& shape, DType dtype, double x) {
  return make(b, std::vector<double>(static_cast<std::size_t>(shape_numel(shape)), x), shape, dtype);
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::sum: return a + b;
    case ReduceOp::max: return std::max(a, b);
    case ReduceOp::min: return std::min(a, b);
  }
  return 0;
}

// Elementwise `op` over the group members' values of elements [offset, offset + n).
std::vector<double> reduce_over(const std::vector<int>& ranks, std::int64_t offset, std::int64_t n,
                                ReduceOp op) {
  std::vector<double> out = values(ranks.front(), offset, n);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    auto v = values(ranks[k], offset, n);
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = combine(op, out[i], v[i]);
  }
  return out;
}

int group_rank_of(const TestGroup& g) {
  auto it = std::find(g.members.begin(), g.members.end(), world_rank());
  return static_cast<int>(it - g.members.begin());
}

void check_all_reduce(const Backend& b, TestGroup& g) {
  const Shape shapes[] = {{7, 5}, {1}, {0, 3}};
  int shape_i = 0;
  for (const auto& shape : shapes) {
    int op_i = 0;
    for (ReduceOp op : kOps) {
      for (DType dtype : kDTypes) {
        bool nonblocking = (shape_i + op_i) % 2 == 1;
        INFO("all_reduce " << reduce_op_name(op) << " " << shape_string(shape) << " " << dtype_name(dtype)
                           << (nonblocking ? " non-blocking" : " blocking"));
        auto n = shape_numel(shape);
        Tensor t = make(b, values(world_rank(), 0, n), shape, dtype);
        if (nonblocking) {
          CommHandle h = g.comm->iall_reduce(t, op);
          h.wait();
        } else {
          g.comm->all_reduce(t, op);
        }
        check_values(b.to_f64(t), reduce_over(g.members, 0, n, op));
      }
      ++op_i;
    }
    ++shape_i;
  }
}

void check_all_gather(const Backend& b, TestGroup& g) {
  const Shape shard_shapes[] = {{7, 5}, {1, 5}, {0, 5}, {2, 3, 2}};
  const int size = g.comm->size(), me = group_rank_of(g);
  int case_i = 0;
  for (const auto& shard_shape : shard_shapes) {
    for (DType dtype : kDTypes) {
      for (bool in_place : {false, true}) {
        bool nonblocking = case_i++ % 3 == 1;
        INFO("all_gather shard " << shape_string(shard_shape) << " " << dtype_name(dtype)
                                 << (in_place ? " in place" : "") << (nonblocking ? " non-blocking" : " blocking"));
        const auto n = shape_numel(shard_shape);
        Shape full_shape = shard_shape;
        full_shape[0] *= size;
        std::vector<double> expected;
        for (int r : g.members) {
          auto v = values(r, 0, n);
          expected.insert(expected.end(), v.begin(), v.end());
        }
        Tensor gathered = filled(b, full_shape, dtype, kSentinel);
        Tensor shard;
        if (in_place) {
          shard = gathered.row_slice(shard_shape[0] * me, shard_shape[0] * (me + 1));
          b.assign_f64(shard, values(world_rank(), 0, n));
        } else {
          shard = make(b, values(world_rank(), 0, n), shard_shape, dtype);
        }
        if (nonblocking) {
          CommHandle h = g.comm->iall_gather(shard, gathered);
          h.wait();
        } else {
          g.comm->all_gather(shard, gathered);
        }
        check_values(b.to_f64(gathered), expected);
      }
    }
  }
}

void check_reduce_scatter(const Backend& b, TestGroup& g) {
  const Shape shard_shapes[] = {{7, 5}, {1, 5}, {0, 5}};
  const int size = g.comm->size(), me = group_rank_of(g);
  int case_i = 0;
  for (const auto& shard_shape : shard_shapes) {
    for (ReduceOp op : kOps) {
      for (DType dtype : kDTypes) {
        bool nonblocking = case_i++ % 3 != 0;
        INFO("reduce_scatter " << reduce_op_name(op) << " shard " << shape_string(shard_shape) << " "
                               << dtype_name(dtype) << (nonblocking ? " non-blocking" : " blocking"));
        const auto n = shape_numel(shard_shape);
        Shape full_shape = shard_shape;
        full_shape[0] *= size;
        Tensor full = make(b, values(world_rank(), 0, n * size), full_shape, dtype);
        Tensor shard = filled(b, shard_shape, dtype, kSentinel);
        if (nonblocking) {
          CommHandle h = g.comm->ireduce_scatter(full, shard, op);
          h.wait();
        } else {
          g.comm->reduce_scatter(full, shard, op);
        }
        check_values(b.to_f64(shard), reduce_over(g.members, n * me, n, op));
      }
    }
  }
}

void check_broadcast(const Backend& b, TestGroup& g) {
  const Shape shapes[] = {{7, 5}, {1}, {0, 4}};
  const int me = group_rank_of(g);
  for (int root = 0; root < g.comm->size(); ++root) {
    for (int k = 0; k < 2; ++k) {
      const Shape& shape = shapes[(root + k) % 3];
      DType dtype = kDTypes[(root + k) % 2];
      bool nonblocking = k == 1;
      INFO("broadcast root " << root << " " << shape_string(shape) << " " << dtype_name(dtype)
                             << (nonblocking ? " non-blocking" : " blocking"));
      const auto n = shape_numel(shape);
      const int root_world = g.members[static_cast<std::size_t>(root)];
      Tensor t = me == root ? make(b, values(root_world, 0, n), shape, dtype) : filled(b, shape, dtype, kSentinel);
      if (nonblocking) {
        CommHandle h = g.comm->ibroadcast(t, root);
        h.wait();
      } else {
        g.comm->broadcast(t, root);
      }
      check_values(b.to_f64(t), values(root_world, 0, n));
    }
  }
}

void check_reduce(const Backend& b, TestGroup& g) {
  const Shape shapes[] = {{7, 5}, {1}, {0, 4}};
  const int me = group_rank_of(g);
  for (int root = 0; root < g.comm->size(); ++root) {
    for (int k = 0; k < 2; ++k) {
      const Shape& shape = shapes[(root + k) % 3];
      DType dtype = kDTypes[(root + k + 1) % 2];
      ReduceOp op = kOps[(root + k) % 3];
      bool nonblocking = k == 1;
      bool in_place = (root + k) % 4 == 3;
      INFO("reduce root " << root << " " << reduce_op_name(op) << " " << shape_string(shape) << " "
                          << dtype_name(dtype) << (in_place ? " in place" : "")
                          << (nonblocking ? " non-blocking" : " blocking"));
      const auto n = shape_numel(shape);
      Tensor in = make(b, values(world_rank(), 0, n), shape, dtype);
      Tensor out;  // undefined on non-roots when k == 0
      if (me == root) out = in_place ? in : filled(b, shape, dtype, kSentinel);
      else if (k == 1) out = filled(b, shape, dtype, kSentinel);
      if (nonblocking) {
        CommHandle h = g.comm->ireduce(in, out, root, op);
        h.wait();
      } else {
        g.comm->reduce(in, out, root, op);
      }
      if (me == root) check_values(b.to_f64(out), reduce_over(g.members, 0, n, op));
      else if (out.defined()) check_values(b.to_f64(out), std::vector<double>(static_cast<std::size_t>(n), kSentinel));
    }
  }
}

void check_point_to_point(const Backend& b, TestGroup& g) {
  const int size = g.comm->size(), me = group_rank_of(g);
  const Shape shapes[] = {{7, 5}, {1}, {0, 2}};
  // Ring shifts by every distance: each ordered pair of peers exchanges exactly once.
  for (int shift = 1; shift < size; ++shift) {
    const Shape& shape = shapes[shift % 3];
    DType dtype = kDTypes[shift % 2];
    const int dst = (me + shift) % size, src = (me - shift + size) % size;
    const auto n = shape_numel(shape);
    INFO("shift " << shift << " dst " << dst << " src " << src << " " << shape_string(shape) << " " << dtype_name(dtype));
    Tensor out = make(b, values(world_rank(), 1000 * shift, n), shape, dtype);
    Tensor in = filled(b, shape, dtype, kSentinel);
    if (shift % 2 == 1) {
      g.comm->sendrecv(out, dst, in, src, shift);
    } else {
      CommHandle r = g.comm->irecv(in, src, shift);
      CommHandle s = g.comm->isend(out, dst, shift);
      s.wait();
      r.wait();
    }
    check_values(b.to_f64(in), values(g.members[static_cast<std::size_t>(src)], 1000 * shift, n));
  }
  // Blocking send/recv between neighbours (0<->1, 2<->3, ...), two tags received in the opposite
  // order to the one they were sent in.
  const int partner = me ^ 1;
  if (partner >= size) return;
  const Shape shape{3, 7};
  Tensor first = make(b, values(world_rank(), 0, 21), shape, DType::f64);
  Tensor second = make(b, values(world_rank(), 100, 21), shape, DType::f64);
  Tensor got_first = filled(b, shape, DType::f64, kSentinel), got_second = filled(b, shape, DType::f64, kSentinel);
  if (me % 2 == 0) {
    g.comm->send(first, partner, 1);
    g.comm->send(second, partner, 2);
    g.comm->recv(got_first, partner, 1);
    g.comm->recv(got_second, partner, 2);
  } else {
    CommHandle h2 = g.comm->irecv(got_second, partner, 2);
    CommHandle h1 = g.comm->irecv(got_first, partner, 1);
    h2.wait();
    h1.wait();
    g.comm->send(first, partner, 1);
    g.comm->send(second, partner, 2);
  }
  const int partner_world = g.members[static_cast<std::size_t>(partner)];
  check_values(b.to_f64(got_first), values(partner_world, 0, 21));
  check_values(b.to_f64(got_second), values(partner_world, 100, 21));
}

// Several operations in flight on one communicator, waited in the reverse order of issue.
void check_overlapped(const Backend& b, TestGroup& g) {
  const int size = g.comm->size(), me = group_rank_of(g), last = size - 1;
  Tensor sum = make(b, values(world_rank(), 0, 35), {7, 5}, DType::f64);
  Tensor shard = make(b, values(world_rank(), 0, 10), {2, 5}, DType::f32);
  Tensor gathered = filled(b, {2 * size, 5}, DType::f32, kSentinel);
  Tensor bcast = me == last ? make(b, values(g.members.back(), 7, 9), {9}, DType::f64) : filled(b, {9}, DType::f64, kSentinel);
  Tensor full = make(b, values(world_rank(), 0, 3 * size), {3 * size}, DType::f64);
  Tensor part = filled(b, {3}, DType::f64, kSentinel);
  {
    CommHandle h1 = g.comm->iall_reduce(sum, ReduceOp::sum);
    CommHandle h2 = g.comm->iall_gather(shard, gathered);
    CommHandle h3 = g.comm->ibroadcast(bcast, last);
    CommHandle h4 = g.comm->ireduce_scatter(full, part, ReduceOp::max);
    // h4 is polled to completion; the rest are waited on, last issued first.
    while (!h4.test()) {
    }
    CHECK_FALSE(h4.active());
    h3.wait();
    h2.wait();
    // h1 completes in its destructor.
  }
  check_values(b.to_f64(sum), reduce_over(g.members, 0, 35, ReduceOp::sum));
  std::vector<double> expected;
  for (int r : g.members) {
    auto v = values(r, 0, 10);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  check_values(b.to_f64(gathered), expected);
  check_values(b.to_f64(bcast), values(g.members.back(), 7, 9));
  check_values(b.to_f64(part), reduce_over(g.members, 3 * me, 3, ReduceOp::max));
}

// bf16 and f16 on the wire (2-byte type, f32-arithmetic reductions): values in [-8, 8], whose
// sums over up to 27 ranks stay below 256 and so are exact in either format, checked bit for bit,
// through every collective; and the ledger counts 2 bytes per element.
double small_value(int rank, std::int64_t i) { return static_cast<double>(((rank + 3) * 13 + i * 7 + rank * i) % 17 - 8); }

std::vector<double> small_values(int rank, std::int64_t offset, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = small_value(rank, offset + i);
  return v;
}

void check_16bit(const Backend& b, TestGroup& g, DType dtype) {
  const int size = g.comm->size(), me = group_rank_of(g);
  const std::int64_t n = 35;
  for (ReduceOp op : kOps) {
    INFO(dtype_name(dtype) << " all_reduce " << reduce_op_name(op));
    Tensor t = make(b, small_values(world_rank(), 0, n), {7, 5}, dtype);
    CommHandle h = g.comm->iall_reduce(t, op);
    h.wait();
    std::vector<double> want = small_values(g.members.front(), 0, n);
    for (std::size_t k = 1; k < g.members.size(); ++k) {
      auto v = small_values(g.members[k], 0, n);
      for (std::size_t i = 0; i < want.size(); ++i) want[i] = combine(op, want[i], v[i]);
    }
    check_values(b.to_f64(t), want);
  }
  // reduce-scatter: shard r of the sum; all-gather back; reduce to the last rank; broadcast from it.
  Tensor full = make(b, small_values(world_rank(), 0, 3 * size), {3 * size}, dtype);
  Tensor shard = filled(b, {3}, dtype, kSentinel);
  g.comm->reduce_scatter(full, shard, ReduceOp::sum);
  std::vector<double> sum(static_cast<std::size_t>(3 * size), 0.0);
  for (int r : g.members) {
    auto v = small_values(r, 0, 3 * size);
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += v[i];
  }
  check_values(b.to_f64(shard), std::vector<double>(sum.begin() + 3 * me, sum.begin() + 3 * me + 3));
  Tensor gathered = filled(b, {3 * size}, dtype, kSentinel);
  g.comm->all_gather(shard, gathered);
  check_values(b.to_f64(gathered), sum);
  Tensor out = filled(b, {3 * size}, dtype, kSentinel);
  g.comm->reduce(full, out, size - 1, ReduceOp::sum);
  if (me == size - 1) check_values(b.to_f64(out), sum);
  g.comm->broadcast(out, size - 1);
  check_values(b.to_f64(out), sum);
  // A ring shift: each rank receives its predecessor's values, bit for bit.
  Tensor send = make(b, small_values(world_rank(), 100, 9), {9}, dtype), recv = filled(b, {9}, dtype, kSentinel);
  g.comm->sendrecv(send, (me + 1) % size, recv, (me + size - 1) % size);
  check_values(b.to_f64(recv), small_values(g.members[static_cast<std::size_t>((me + size - 1) % size)], 100, 9));
}

}  // namespace

TEST_CASE("bf16 and f16 travel as 2-byte elements and sum in f32 through every collective", "[comm][mpi][lowp]") {
  auto backend = make_host_backend();
  CommLedger ledger;
  auto groups = make_groups(&ledger, test_wait_policy());
  for (auto& g : groups) {
    INFO("group " << g.spec.name << " of size " << g.members.size() << " at world rank " << world_rank());
    for (DType dtype : {DType::bf16, DType::f16}) check_16bit(*backend, g, dtype);
  }
  // Every entry counted 2 bytes per element: the all-reduces' 35 elements are 70 bytes.
  bool any = false;
  for (const auto& e : ledger.entries())
    if (e.op == CollectiveOp::all_reduce) {
      CHECK(e.logical_bytes == 70);
      any = true;
    }
  CHECK(any);
}

TEST_CASE("MPI collectives match a serial computation on groups of several shapes", "[comm][mpi]") {
  auto backend = make_host_backend();
  const WaitPolicy policy = test_wait_policy();
  auto groups = make_groups(nullptr, policy);
  for (auto& g : groups) {
    INFO("group " << g.spec.name << " of size " << g.members.size() << " at world rank " << world_rank());
    CHECK(g.comm->world_ranks() == g.members);
    CHECK(g.comm->size() == static_cast<int>(g.members.size()));
    CHECK(g.comm->rank() == group_rank_of(g));
    CHECK(std::string(g.comm->backend_name()) == "mpi");
    CHECK(g.comm->name() == g.spec.name);
    check_all_reduce(*backend, g);
    check_all_gather(*backend, g);
    check_reduce_scatter(*backend, g);
    check_broadcast(*backend, g);
    check_reduce(*backend, g);
    check_point_to_point(*backend, g);
    check_overlapped(*backend, g);
    g.comm->barrier();
  }
}

// Collectives in flight on two groups, waited for in opposite orders on even and odd ranks: the
// MPI library progresses both inside any wait, and so must the ring collectives (one wait drives
// every ring in flight on the rank: comm/ring_collectives.hpp), or this deadlocks.  Awkward sizes:
// 1,001 elements do not split evenly over 3 or 8 ranks.
TEST_CASE("two collectives in flight complete whichever is waited for first", "[comm][mpi][rings]") {
  auto backend = make_host_backend();
  MPI_Comm a = MPI_COMM_NULL, b = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_dup(MPI_COMM_WORLD, &b);
  auto first = make_mpi_communicator("first", a, nullptr, test_wait_policy());
  auto second = make_mpi_communicator("second", b, nullptr, test_wait_policy());
  const std::int64_t n = 1001;
  Tensor x = make(*backend, values(world_rank(), 0, n), {n}, DType::f64);
  Tensor y = make(*backend, values(world_rank(), n, n), {n}, DType::f64);
  Tensor gathered = filled(*backend, {3 * world_size()}, DType::f64, kSentinel);
  Tensor shard = make(*backend, values(world_rank(), 0, 3), {3}, DType::f64);
  CommHandle hx = first->iall_reduce(x);
  CommHandle hy = second->iall_reduce(y);
  CommHandle hg = first->iall_gather(shard, gathered);
  if (world_rank() % 2 == 0) {
    hx.wait();
    hy.wait();
    hg.wait();
  } else {
    hg.wait();
    hy.wait();
    hx.wait();
  }
  std::vector<int> everyone(static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
  check_values(backend->to_f64(x), reduce_over(everyone, 0, n, ReduceOp::sum));
  check_values(backend->to_f64(y), reduce_over(everyone, n, n, ReduceOp::sum));
  std::vector<double> expected;
  for (int r = 0; r < world_size(); ++r) {
    auto v = values(r, 0, 3);
    expected.insert(expected.end(), v.begin(), v.end());
  }
  check_values(backend->to_f64(gathered), expected);
}

TEST_CASE("a pipelined chain cuts a message in the chunks that minimise its time on NVLink", "[comm][rings]") {
  CHECK(chain_chunks(1, 1 << 30) == 1);
  CHECK(chain_chunks(2, 1 << 30) == 1);        // one hop: nothing to overlap
  CHECK(chain_chunks(3, 0) == 1);
  CHECK(chain_chunks(8, 6 << 20) == 6);        // sqrt(6 x 6 MiB / 1 MiB)
  CHECK(chain_chunks(10, 2 << 20) == 4);       // sqrt(8 x 2)
  CHECK(chain_chunks(4, 64 << 10) == 1);       // sqrt(2 / 16) rounds to 0: at least one
}

// Broadcast and reduce large enough that the ring build's chains (NCCL's pipelined chain along
// the ring) cut them in several chunks on 3 or more ranks, from every root; 300,001 doubles do not
// split evenly.  Under the MPI library's collectives the same checks hold.
TEST_CASE("broadcast and reduce of several chunks arrive whole from every root", "[comm][mpi][rings]") {
  auto backend = make_host_backend();
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  auto comm = make_mpi_communicator("chain", dup, nullptr, test_wait_policy());
  const std::int64_t n = 300001;
  std::vector<int> everyone(static_cast<std::size_t>(world_size()));
  for (int r = 0; r < world_size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
  for (int root = 0; root < world_size(); ++root) {
    INFO("root " << root << " of " << world_size());
    Tensor b = world_rank() == root ? make(*backend, values(root, 0, n), {n}, DType::f64)
                                    : filled(*backend, {n}, DType::f64, kSentinel);
    comm->broadcast(b, root);
    check_values(backend->to_f64(b), values(root, 0, n));
    Tensor in = make(*backend, values(world_rank(), 7, n), {n}, DType::f64);
    Tensor out = filled(*backend, {n}, DType::f64, kSentinel);
    comm->reduce(in, out, root, ReduceOp::sum);
    if (world_rank() == root) check_values(backend->to_f64(out), reduce_over(everyone, 7, n, ReduceOp::sum));
    check_values(backend->to_f64(in), values(world_rank(), 7, n));  // the input is left alone
  }
}
