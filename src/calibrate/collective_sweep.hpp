#pragma once
// The measurement half of `mdtp calibrate`: nccl-tests-style sweeps of each collective over a
// range of sizes on each requested mesh group kind (docs/theory.md §5).
//
// Per (group kind, op, size): one call on patterned data whose result is checked exactly (small
// integers, exact in f32), then `warmup` calls and `iterations` timed calls back to back after a
// barrier; the time per call is the loop time / iterations on each rank, reported as the mean
// and the maximum over all ranks (every group of the kind runs at once, as in a layer).
//   size S   logical bytes: the buffer (all-reduce, broadcast, reduce) or the full gathered
//            buffer (all-gather, reduce-scatter), rounded up so that the group divides it
//   algbw    S / t_max;  busbw = algbw · bus_factor(op, n)
// Calls go through the mesh's Communicators (so the wait policy is the layers' own) with the
// ledger switched off.
// With sync_timing, each timed call is preceded by a barrier on its group and timed alone (the
// transfer, as the ledger's sync timing records it, comm/ledger.hpp); the time per call is then
// this rank's median over the calls (robust to a call that lost its core to another process; at
// least 7 calls, or --iters if fewer),
// reported as mean and maximum over ranks.  `sizes`, when not empty, replaces the geometric
// series min·factor^k (a sweep at sizes a fit never saw, to test its predictions).
#include <mpi.h>

#include <string>
#include <vector>

#include "comm/ledger.hpp"
#include "mesh/mesh.hpp"
#include "spec/names.hpp"

namespace mdtp::calibrate {

struct SweepSettings {
  std::vector<std::string> groups{group::world, group::tp, group::dp};
  std::vector<CollectiveOp> ops{CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                                CollectiveOp::broadcast, CollectiveOp::reduce};
  std::int64_t min_bytes = 8;
  std::int64_t max_bytes = 64ll << 20;
  int factor = 2;  // sizes min, min·factor, ... ≤ max
  int warmup = 5;
  int iterations = 20;  // at sizes ≤ 1 MiB; fewer above (iterations · 1 MiB / S, at least 3)
  DType dtype = DType::f32;
  bool sync_timing = false;
  // With sync_timing: before each timed call this rank writes over this many bytes of its own, so
  // the call finds its buffers evicted from the caches, as a layer's collective does after the
  // GEMMs between two calls (0: warm, the buffers stay cached from the previous call).
  std::int64_t flush_bytes = 0;
  std::vector<std::int64_t> sizes;  // bytes; empty: min_bytes, min_bytes·factor, ... ≤ max_bytes
};

struct SweepPoint {
  std::string group;
  int group_size = 1;
  std::string link;  // link_class_name of the group kind
  CollectiveOp op = CollectiveOp::all_reduce;
  std::int64_t bytes = 0;
  std::int64_t elements = 0;
  int iterations = 0;
  double seconds_mean = 0.0, seconds_max = 0.0;  // per call
  double algbw = 0.0, busbw = 0.0;               // bytes per second, from seconds_max
  bool correct = false;
};

// "all_reduce" → CollectiveOp; an unknown name is an mdtp::Error listing the known ones.
CollectiveOp parse_collective(const std::string& name);

// Local validation of the settings against the mesh (group names, sizes): call before any
// collective so every rank fails alike.
void validate_sweep(const SweepSettings& settings, const Mesh& mesh);

// The requested groups that are swept: those of more than one rank, and only the first of
// several names for the same ranks (on 2 ranks "tp" is "world").
std::vector<std::string> swept_groups(const SweepSettings& settings, const Mesh& mesh);

// Collective over `world` (the mesh's world).  `progress` (rank 0 only, may be null) gets each
// point as it is measured.
std::vector<SweepPoint> run_sweep(const Mesh& mesh, const SweepSettings& settings, MPI_Comm world,
                                  void (*progress)(const SweepPoint&) = nullptr);

// The iterations timed at `bytes`.
int iterations_at(const SweepSettings& settings, std::int64_t bytes);

}  // namespace mdtp::calibrate
