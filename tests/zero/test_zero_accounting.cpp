// What a ZeRO engine holds and sends, against what its bucket plan says, to the byte:
//  - memory per category (MemoryTracker) after construction and after steps, every stage, with
//    and without offload, AdamW and SGD; stage 3 never holds more parameters than its shards plus
//    the two units a pass has in hand (the running one and the prefetched next);
//  - the ledger per (phase, group, op) of a step of two micro-batches: the reduce-scatter of every
//    padded bucket (twice when stages 2–3 reduce per micro-batch) and the partial-sum all-reduces
//    of its shard (grad-sync), the norm's scalars and
//    the all-gather of every bucket (optimizer), stage 3's gathers per pass (param-gather).
// The expected figures are written here from the plan (phase 2 moves them into src/cost).
#include <catch2/catch.hpp>

#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "mesh/mesh.hpp"
#include "plan/bucket_memory.hpp"
#include "zero_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

constexpr const char* kWte = "transformer.wte.weight";

struct Bytes {
  std::int64_t parameters = 0, gradients = 0, optimizer_state = 0, master_weights = 0;
  bool operator==(const Bytes&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Bytes& b) {
  return os << "{parameters " << b.parameters << ", gradients " << b.gradients << ", optimizer_state "
            << b.optimizer_state << ", master_weights " << b.master_weights << "}";
}

Bytes tracked(const MemoryTracker& t) {
  return {t.current(MemCategory::parameters), t.current(MemCategory::gradients), t.current(MemCategory::optimizer_state),
          t.current(MemCategory::master_weights)};
}

Bytes operator-(const Bytes& a, const Bytes& b) {
  return {a.parameters - b.parameters, a.gradients - b.gradients, a.optimizer_state - b.optimizer_state,
          a.master_weights - b.master_weights};
}

// What a stage holds between steps (docs/zero.md §3): src/plan/bucket_memory's model, which the
// allocator's figures are held against here.
Bytes expected_memory(const BucketPlan& plan, const ZeroConfig& z, const OptimizerSpec& opt) {
  const ZeroHeldBytes h = zero_held_bytes(plan, z.stage, z.offload, opt.kind == OptimizerKind::adamw);
  return {h.parameters, h.gradients, h.optimizer_state, h.master_weights};
}

// The buckets a unit's pass reads, from the plan: its own parameters', the tied wte's for the head
// (one model holds both), none for the embedding's backward-input pass.
std::vector<std::set<std::size_t>> unit_reads(const ZeroEngine& e, int units, bool backward) {
  std::vector<std::set<std::size_t>> reads(static_cast<std::size_t>(units));
  for (std::size_t b = 0; b < e.plan().buckets.size(); ++b)
    for (const BucketSlot& s : e.plan().buckets[b].slots) {
      const int u = e.layout().unit(s.param);
      if (!(backward && u == 0)) reads[static_cast<std::size_t>(u)].insert(b);
      if (e.parameters()[s.param].name() == kWte) reads[static_cast<std::size_t>(units - 1)].insert(b);
    }
  return reads;
}

struct Traffic {
  std::int64_t calls = 0, bytes = 0;
  bool operator==(const Traffic&) const = default;
};
using TrafficMap = std::map<std::tuple<std::string, std::string, std::string>, Traffic>;

void add(TrafficMap& m, const std::string& phase, const std::string& group, CollectiveOp op, std::int64_t bytes,
         std::int64_t times = 1) {
  Traffic& t = m[{phase, group, collective_name(op)}];
  t.calls += times;
  t.bytes += bytes * times;
}

TrafficMap expected_traffic(const ZeroEngine& e, const Mesh& mesh, int micro_batches, int units) {
  TrafficMap m;
  const ZeroConfig& z = e.config();
  const int dp = mesh.comm(z.data_parallel_group).size();
  // A bucket moves over its shard group: dp, or dp × depth for 2.5D weights (its shards count).
  auto group = [&](std::size_t b) { return e.plan().buckets[b].shard_group.empty() ? std::string("dp") : e.plan().buckets[b].shard_group; };
  for (std::size_t i = 0; i < e.plan().buckets.size(); ++i) {
    const Bucket& b = e.plan().buckets[i];
    const bool many = b.shards > 1;
    // One reduce-scatter per step, or per micro-batch when stages 2–3 reduce every micro-batch.
    const int rounds = z.stage >= 2 && z.reduce_per_micro_batch ? micro_batches : 1;
    if (many) add(m, "grad-sync", group(i), CollectiveOp::reduce_scatter, b.grad_bytes(), rounds);
    for (const std::string& g : b.partial_groups) add(m, "grad-sync", mesh.comm(g).name(), CollectiveOp::all_reduce, b.grad_shard_bytes());
    if (z.stage < 3 && many) add(m, "optimizer", group(i), CollectiveOp::all_gather, b.value_bytes());
    if (z.stage == 3 && many && z.keep_parameters) add(m, "param-gather", group(i), CollectiveOp::all_gather, b.value_bytes());
  }
  if (dp > 1) add(m, "optimizer", "dp", CollectiveOp::all_reduce, 8);
  if (mesh.comm(z.model_parallel_group).size() > 1) add(m, "optimizer", mesh.comm(z.model_parallel_group).name(), CollectiveOp::all_reduce, 8);
  if (z.stage == 3 && !z.keep_parameters)
    for (bool backward : {false, true})
      for (const auto& reads : unit_reads(e, units, backward))
        for (std::size_t b : reads)
          if (e.plan().buckets[b].shards > 1)
            add(m, "param-gather", group(b), CollectiveOp::all_gather, e.plan().buckets[b].value_bytes(), micro_batches);
  return m;
}

TrafficMap recorded_traffic(const CommLedger& ledger) {
  TrafficMap m;
  for (const LedgerEntry& entry : ledger.entries())
    if (entry.phase == "grad-sync" || entry.phase == "optimizer" || entry.phase == "param-gather")
      add(m, entry.phase, entry.group, entry.op, entry.logical_bytes);
  return m;
}

std::string describe(const TrafficMap& m) {
  std::ostringstream os;
  for (const auto& [key, t] : m)
    os << "  " << std::get<0>(key) << " " << std::get<1>(key) << " " << std::get<2>(key) << ": " << t.calls << " calls, "
       << t.bytes << " B\n";
  return os.str();
}

// Σ over the pairs (unit, next unit of the pass) of the bytes of the buckets both read.
std::int64_t largest_pair(const ZeroEngine& e, int units) {
  std::int64_t worst = 0;
  for (bool backward : {false, true}) {
    const auto reads = unit_reads(e, units, backward);
    for (int u = 0; u < units; ++u) {
      std::set<std::size_t> both = reads[static_cast<std::size_t>(u)];
      const int next = backward ? u - 1 : u + 1;
      if (next >= 0 && next < units) both.insert(reads[static_cast<std::size_t>(next)].begin(), reads[static_cast<std::size_t>(next)].end());
      std::int64_t bytes = 0;
      for (std::size_t b : both) bytes += e.plan().buckets[b].value_bytes();
      worst = std::max(worst, bytes);
    }
  }
  return worst;
}

std::vector<ZeroConfig> accounting_configs() {
  std::vector<ZeroConfig> out;
  for (int stage = 1; stage <= 3; ++stage)
    for (bool offload : {false, true}) {
      ZeroConfig z;
      z.stage = stage;
      z.offload = offload;
      z.bucket_mb = 0.01;
      out.push_back(z);
    }
  ZeroConfig keep;
  keep.stage = 3;
  keep.keep_parameters = true;
  keep.bucket_mb = 0.01;
  out.push_back(keep);
  for (int stage = 2; stage <= 3; ++stage) {
    ZeroConfig per_micro_batch;
    per_micro_batch.stage = stage;
    per_micro_batch.reduce_per_micro_batch = true;
    per_micro_batch.bucket_mb = 0.01;
    out.push_back(per_micro_batch);
  }
  return out;
}

}  // namespace

TEST_CASE("a ZeRO engine holds and sends what its bucket plan says, to the byte", "[zero][accounting]") {
  for (const ModeCase& c : zero_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label()) {
      GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
      const ParamMap start = random_parameters(base, 11);
      const int units = unit_count(base.model->config());
      MemoryTracker& tracker = base.backend->allocator().tracker();
      for (const ZeroConfig& z : accounting_configs())
        for (const OptimizerKind kind : {OptimizerKind::adamw, OptimizerKind::sgd}) {
          if (kind == OptimizerKind::sgd && z.stage != 2) continue;
          OptimizerSpec opt = test_adamw(0.05);
          opt.kind = kind;
          const Bytes before = tracked(tracker);
          const std::int64_t communication = tracker.current(MemCategory::communication);
          ZeroRun run(base, start, z, opt);
          const Bytes want = expected_memory(run.engine->plan(), z, opt);
          INFO("stage " << z.stage << " offload " << z.offload << " keep " << z.keep_parameters
                        << " per micro-batch " << z.reduce_per_micro_batch << " " << optimizer_kind_name(kind));
          CHECK(tracked(tracker) - before == want);
          for (int s = 0; s < 2; ++s) {
            base.ledger.clear();
            tracker.reset_peaks();
            run.step({step_batch(base, 2 * s), step_batch(base, 2 * s + 1)});
            const TrafficMap got = recorded_traffic(base.ledger), expected = expected_traffic(*run.engine, *base.mesh, 2, units);
            INFO("recorded:\n" << describe(got) << "expected:\n" << describe(expected));
            CHECK(got == expected);
            CHECK(tracked(tracker) - before == want);
            CHECK(tracker.current(MemCategory::communication) == communication);
            if (z.stage == 3 && !z.keep_parameters) {
              const std::int64_t peak = tracker.peak(MemCategory::parameters) - before.parameters;
              CHECK(peak <= run.engine->plan().value_shard_bytes() + largest_pair(*run.engine, units));
            }
          }
          if (world_rank() == 0 && kind == OptimizerKind::adamw && !z.keep_parameters)
            std::cout << "[zero accounting] " << c.label() << " stage=" << z.stage << " offload=" << z.offload
                      << " buckets=" << run.engine->plan().buckets.size() << " memory " << (tracked(tracker) - before)
                      << " plan " << want << "\n";
        }
    }
  }
}

// Offload's host part (what a GPU run's device allocator does not hold): the reduced gradient
// shard's copy, the moments and the master weights; the device keeps the rest.  The GPU runs of
// tests/gpu/train_parity.sh hold the device allocator to zero_device_bytes.
TEST_CASE("offload: what ZeRO holds is the device's part plus the host's, category by category", "[zero][accounting]") {
  std::vector<BucketInput> params;
  for (int i = 0; i < 5; ++i) {
    BucketInput p;
    p.name = "p";
    p.name += std::to_string(i);  // not "p" + to_string: GCC 12 warns falsely (-Wrestrict)
    p.numel = 1000 + 37 * i;
    p.decays = i % 2 == 0;
    p.unit = i;
    params.push_back(p);
  }
  for (int dp : {1, 2, 3}) {
    BucketOptions o;
    o.dp = dp;
    o.cap_bytes = 6000;
    const BucketPlan plan = plan_buckets(params, o);
    for (int stage = 0; stage <= 3; ++stage)
      for (bool offload : {false, true})
        for (bool moments : {false, true}) {
          INFO("dp " << dp << " stage " << stage << (offload ? " offload" : "") << (moments ? " adamw" : " sgd"));
          const ZeroHeldBytes all = zero_held_bytes(plan, stage, offload, moments);
          const ZeroHeldBytes host = zero_offloaded_bytes(plan, stage, offload, moments);
          const ZeroHeldBytes device = zero_device_bytes(plan, stage, offload, moments);
          CHECK(device.parameters + host.parameters == all.parameters);
          CHECK(device.gradients + host.gradients == all.gradients);
          CHECK(device.optimizer_state + host.optimizer_state == all.optimizer_state);
          CHECK(device.master_weights + host.master_weights == all.master_weights);
          if (!offload || stage == 0) {
            CHECK(host == ZeroHeldBytes{});
          } else {
            CHECK(host.parameters == 0);
            CHECK(host.gradients == plan.state_shard_bytes());
            CHECK(host.master_weights == plan.state_shard_bytes());
            CHECK(host.optimizer_state == (moments ? 2 * plan.state_shard_bytes() : 0));
            CHECK(device.optimizer_state == 0);
            CHECK(device.master_weights == 0);
            // The device's gradients are those of the same stage without offload.
            CHECK(device.gradients == zero_held_bytes(plan, stage, false, moments).gradients);
          }
        }
  }
}
