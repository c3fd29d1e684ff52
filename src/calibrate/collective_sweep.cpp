#include "calibrate/collective_sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

#include "comm/bookkeeping_collectives.hpp"
#include "run/rank_stats.hpp"
#include "core/backend.hpp"

namespace mdtp::calibrate {
namespace {

// Pattern value of element i on group rank r: small integers, exact in f32 and in their sums.
double pattern(int r, std::int64_t i) { return (r + 1) + static_cast<double>(i % 7) * 16.0; }
double pattern_sum(int n, std::int64_t i) { return n * (n + 1) / 2.0 + n * static_cast<double>(i % 7) * 16.0; }

// The buffers of one op at one size on one group, and how to run and check it.
class CollectiveCase {
 public:
  CollectiveCase(Communicator& comm, CollectiveOp op, std::int64_t elements, DType dtype, const Backend& backend)
      : comm_(comm), op_(op), n_(comm.size()), r_(comm.rank()), elements_(elements), backend_(backend) {
    const std::int64_t shard = elements / n_;
    switch (op) {
      case CollectiveOp::all_gather:
        in_ = backend.empty({shard}, dtype, MemCategory::communication);
        out_ = backend.empty({elements}, dtype, MemCategory::communication);
        break;
      case CollectiveOp::reduce_scatter:
        in_ = backend.empty({elements}, dtype, MemCategory::communication);
        out_ = backend.empty({shard}, dtype, MemCategory::communication);
        break;
      case CollectiveOp::reduce:
        in_ = backend.empty({elements}, dtype, MemCategory::communication);
        out_ = backend.empty({elements}, dtype, MemCategory::communication);
        break;
      default:  // in place
        in_ = backend.empty({elements}, dtype, MemCategory::communication);
        break;
    }
  }

  void fill_pattern() {
    std::vector<double> v(static_cast<std::size_t>(in_.numel()));
    const std::int64_t offset = op_ == CollectiveOp::all_gather ? r_ * in_.numel() : 0;
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = pattern(r_, offset + static_cast<std::int64_t>(i));
    backend_.assign_f64(in_, v);
  }
  // Zeros keep repeated in-place reductions bounded during the timed loop.
  void fill_zeros() { backend_.fill(in_, 0.0); }

  void call() {
    switch (op_) {
      case CollectiveOp::all_reduce: comm_.all_reduce(in_); break;
      case CollectiveOp::all_gather: comm_.all_gather(in_, out_); break;
      case CollectiveOp::reduce_scatter: comm_.reduce_scatter(in_, out_); break;
      case CollectiveOp::broadcast: comm_.broadcast(in_, 0); break;
      case CollectiveOp::reduce: comm_.reduce(in_, out_, 0); break;
      default: throw_error("calibrate does not sweep ", collective_name(op_));
    }
  }

  // After one call on fill_pattern() data: is this rank's result exact?
  bool check() const {
    const std::vector<double> got = backend_.to_f64(out_.defined() ? out_ : in_);
    const std::int64_t shard = elements_ / n_;
    for (std::size_t k = 0; k < got.size(); ++k) {
      const auto i = static_cast<std::int64_t>(k);
      double want = 0.0;
      switch (op_) {
        case CollectiveOp::all_reduce: want = pattern_sum(n_, i); break;
        case CollectiveOp::all_gather: want = pattern(static_cast<int>(i / shard), i); break;
        case CollectiveOp::reduce_scatter: want = pattern_sum(n_, r_ * shard + i); break;
        case CollectiveOp::broadcast: want = pattern(0, i); break;
        case CollectiveOp::reduce:
          if (r_ != 0) return true;  // only the root's output is defined
          want = pattern_sum(n_, i);
          break;
        default: return false;
      }
      if (got[k] != want) return false;
    }
    return true;
  }

 private:
  Communicator& comm_;
  CollectiveOp op_;
  int n_, r_;
  std::int64_t elements_;
  const Backend& backend_;
  Tensor in_, out_;
};

void barrier(MPI_Comm comm, WaitPolicy policy) {
  bookkeeping_barrier(comm, policy, WaitLabel{"calibration", "barrier", -1, nullptr});
}

// Element counts of the sweep for a group of n: each size rounded up to a multiple of n (the
// dim-0 collectives need equal shards; the others get the same sizes for comparability).
std::vector<std::int64_t> sweep_elements(const SweepSettings& s, int n) {
  std::set<std::int64_t> counts;
  const auto width = static_cast<std::int64_t>(dtype_size(s.dtype));
  std::vector<std::int64_t> sizes = s.sizes;
  if (sizes.empty())
    for (std::int64_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= s.factor) sizes.push_back(bytes);
  for (std::int64_t bytes : sizes) {
    std::int64_t e = std::max<std::int64_t>(1, (bytes + width - 1) / width);
    e = (e + n - 1) / n * n;
    counts.insert(e);
  }
  return {counts.begin(), counts.end()};
}

// The loop time / iterations: the nccl-tests convention (calls pipeline into each other).
double back_to_back_call_seconds(CollectiveCase& c, int iterations) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) c.call();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iterations;
}

// Each call after a barrier on its group, timed alone; the median over the calls.  A non-empty
// `flush` is written over before each call (outside the timing) to evict the call's buffers.
double synchronised_call_seconds(CollectiveCase& c, Communicator& comm, int iterations, std::vector<char>& flush) {
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    if (!flush.empty()) std::memset(flush.data(), i & 0xff, flush.size());
    comm.barrier();
    const auto start = std::chrono::steady_clock::now();
    c.call();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  const std::size_t mid = times.size() / 2;
  return times.size() % 2 == 1 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
}

}  // namespace

CollectiveOp parse_collective(const std::string& name) {
  for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                          CollectiveOp::broadcast, CollectiveOp::reduce})
    if (name == collective_name(op)) return op;
  throw_error("unknown collective '", name, "'; expected all_reduce, all_gather, reduce_scatter, broadcast or reduce");
}

int iterations_at(const SweepSettings& s, std::int64_t bytes) {
  const double scaled = static_cast<double>(s.iterations) * static_cast<double>(1 << 20) / static_cast<double>(bytes);
  return std::max(std::min(s.iterations, 3), std::min(s.iterations, static_cast<int>(std::ceil(scaled))));
}

void validate_sweep(const SweepSettings& s, const Mesh& mesh) {
  require(s.min_bytes >= 1, "--min-bytes must be at least 1; got ", s.min_bytes);
  require(s.max_bytes >= s.min_bytes, "--max-bytes (", s.max_bytes, ") must be at least --min-bytes (", s.min_bytes, ")");
  require(s.max_bytes <= (1ll << 31), "--max-bytes must be at most 2 GiB; got ", s.max_bytes);
  require(s.flush_bytes >= 0 && s.flush_bytes <= (1ll << 32), "the cache flush must be between 0 and 4 GiB; got ",
          s.flush_bytes);
  require(s.factor >= 2, "--factor must be at least 2; got ", s.factor);
  require(s.iterations >= 1, "--iters must be at least 1; got ", s.iterations);
  require(s.warmup >= 0, "--warmup must not be negative; got ", s.warmup);
  require(s.dtype == DType::f32 || s.dtype == DType::f64, "calibrate sweeps f32 or f64 buffers; got ",
          dtype_name(s.dtype));
  for (std::int64_t bytes : s.sizes)
    require(bytes >= 1 && bytes <= (1ll << 31), "--sizes: every size must be between 1 byte and 2 GiB; got ", bytes);
  require(!s.groups.empty(), "--groups must name at least one mesh group");
  require(!s.ops.empty(), "--ops must name at least one collective");
  for (const auto& g : s.groups)
    require(mesh.has_comm(g), "--groups: the mesh has no group '", g, "' on this rank; known groups include world, tp, dp");
}

std::vector<std::string> swept_groups(const SweepSettings& s, const Mesh& mesh) {
  std::vector<std::string> out;
  std::vector<std::vector<std::vector<int>>> seen;
  for (const auto& group : s.groups) {
    if (mesh.comm(group).size() < 2) continue;  // nothing moves on a one-rank group
    const auto& members = mesh.topology().groups(group);
    if (std::find(seen.begin(), seen.end(), members) != seen.end()) continue;
    seen.push_back(members);
    out.push_back(group);
  }
  return out;
}

std::vector<SweepPoint> run_sweep(const Mesh& mesh, const SweepSettings& s, MPI_Comm world,
                                  void (*progress)(const SweepPoint&)) {
  validate_sweep(s, mesh);
  const WaitPolicy policy = mesh.wait_policy();
  auto backend = make_host_backend();
  CommLedger& ledger = mesh.ledger();
  const bool was_enabled = ledger.enabled();
  ledger.set_enabled(false);
  std::vector<SweepPoint> points;
  std::vector<char> flush(static_cast<std::size_t>(s.sync_timing ? s.flush_bytes : 0));
  for (const auto& group : swept_groups(s, mesh)) {
    Communicator& comm = mesh.comm(group);
    for (CollectiveOp op : s.ops) {
      for (std::int64_t elements : sweep_elements(s, comm.size())) {
        CollectiveCase c(comm, op, elements, s.dtype, *backend);
        SweepPoint p;
        p.group = group;
        p.group_size = comm.size();
        p.link = link_class_name(mesh.topology().link_class(group));
        p.op = op;
        p.elements = elements;
        p.bytes = elements * static_cast<std::int64_t>(dtype_size(s.dtype));
        // A median needs more than the 3 calls the back-to-back loop settles for at large sizes.
        p.iterations = s.sync_timing ? std::max(iterations_at(s, p.bytes), std::min(s.iterations, 7))
                                     : iterations_at(s, p.bytes);
        c.fill_pattern();
        c.call();
        p.correct = run::all_ranks_agree(c.check(), world, policy);
        c.fill_zeros();
        for (int w = 0; w < s.warmup; ++w) c.call();
        barrier(world, policy);
        const double per_call = s.sync_timing ? synchronised_call_seconds(c, comm, p.iterations, flush)
                                              : back_to_back_call_seconds(c, p.iterations);
        const MeanMax t = run::mean_max_over_ranks(per_call, world, policy);
        p.seconds_mean = t.mean;
        p.seconds_max = t.max;
        p.algbw = t.max > 0 ? static_cast<double>(p.bytes) / t.max : 0.0;
        p.busbw = p.algbw * bus_factor(op, p.group_size);
        if (progress && mesh.rank() == 0) progress(p);
        points.push_back(p);
      }
    }
  }
  ledger.set_enabled(was_enabled);
  return points;
}

}  // namespace mdtp::calibrate
