// ZeRO under a two-stage pipeline (pp = 2, driven here by hand: all forwards, then all backwards,
// over the "pp" group), where the tied word embedding lives on both stages and its gradient is
// partial over the `embedding` group: every stage equals the unsharded optimizer on the same
// pipeline, the two wte copies stay identical, and the `embedding` sum is one all-reduce of the
// wte bucket's shard.  Worlds 2 (dp 1), 4 (dp 2) and 8 (1D tp 2, dp 2).
#include <catch2/catch.hpp>

#include <iostream>

#include "mesh/mesh.hpp"
#include "zero_harness.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

constexpr const char* kWte = "transformer.wte.weight";

// One step of m micro-batches through this rank's stage; returns the norm.
double pipeline_step(ZeroRun& r, int first_batch, int m) {
  const Mesh& mesh = *r.base.mesh;
  Communicator& pp = mesh.comm("pp");
  GptModel& model = *r.model;
  ModelChunk& chunk = model.chunk(0);
  const double scale = model.loss_scale(m);
  const ModelShape& config = model.config();
  const ShardBlock edge = shard_block(model.split().residual, mesh, model.micro_batch() * config.seq,
                                      config.hidden, "stage boundary");
  std::vector<std::vector<std::int32_t>> inputs, targets;
  for (int i = 0; i < m; ++i) {
    const TokenBatch b = step_batch(r.base, first_batch + i);
    inputs.push_back(r.base.replica_rows(b.inputs));
    targets.push_back(r.base.replica_rows(b.targets));
  }
  std::vector<ChunkSaved> saved(static_cast<std::size_t>(m));
  auto mb = [&](int i) { return MicroBatch{inputs[static_cast<std::size_t>(i)], targets[static_cast<std::size_t>(i)], i}; };
  auto boundary = [&] { return r.base.backend->empty({edge.rows, edge.cols}, DType::f64, MemCategory::activations); };
  r.engine->begin_step();
  if (pp.rank() == 0) {
    for (int i = 0; i < m; ++i) pp.send(chunk.forward(Tensor(), mb(i), saved[static_cast<std::size_t>(i)]), 1);
    for (int i = 0; i < m; ++i) {
      Tensor dy = boundary();
      pp.recv(dy, 1);
      chunk.backward(dy, scale, saved[static_cast<std::size_t>(i)], i == m - 1);
    }
  } else {
    for (int i = 0; i < m; ++i) {
      Tensor x = boundary();
      pp.recv(x, 0);
      double sum = 0.0;
      chunk.forward(x, mb(i), saved[static_cast<std::size_t>(i)], &sum);
      pp.send(chunk.backward(Tensor(), scale, saved[static_cast<std::size_t>(i)], i == m - 1), 0);
    }
  }
  r.engine->finish_gradients();
  return r.engine->step();
}

}  // namespace

TEST_CASE("ZeRO under a two-stage pipeline sums the tied embedding on its shards", "[zero][pipeline]") {
  for (const ModeCase& c : zero_pipeline_cases_for_world(world_size())) {
    DYNAMIC_SECTION(c.label() << " pp=2") {
      const int dp = c.config.world / (c.config.tp * 2);
      GptRun base(c, zero_model(), kReplicaBatch * dp);
      const ParamMap start = random_parameters(base, 31);
      const int L = static_cast<int>(base.model->config().layers);
      const bool first = base.mesh->comm("pp").rank() == 0;
      const std::vector<UnitRange> chunks = {first ? UnitRange{0, 1} : UnitRange{2, L + 1}};
      const OptimizerSpec opt = test_adamw(0.05);
      ZeroRun ref(base, start, ZeroConfig{}, opt, chunks);
      std::vector<ParamMap> ref_values;
      std::vector<double> ref_norms;
      for (int s = 0; s < 3; ++s) {
        ref_norms.push_back(pipeline_step(ref, 2 * s, 2));
        ref_values.push_back(ref.local());
      }
      for (int stage = 1; stage <= 3; ++stage) {
        ZeroConfig z;
        z.stage = stage;
        z.offload = stage == 2;
        z.bucket_mb = 0.01;
        ZeroRun run(base, start, z, opt, chunks);
        for (int s = 0; s < 3; ++s) {
          base.ledger.clear();
          const double norm = pipeline_step(run, 2 * s, 2);
          const ParamMap values = run.local();
          const double err = max_relative_error_all(values, ref_values[static_cast<std::size_t>(s)]);
          INFO("stage " << stage << " step " << s + 1);
          CHECK(err <= (s == 0 ? 1e-13 : 1e-10));
          CHECK(std::abs(norm - ref_norms[static_cast<std::size_t>(s)]) <= 1e-13 * ref_norms[static_cast<std::size_t>(s)]);
          // The embedding's sum: one all-reduce of the wte bucket's shard, on both stages.
          const Bucket& wte = run.engine->plan().bucket_of(run.engine->parameter_index(kWte));
          std::int64_t calls = 0, bytes = 0;
          for (const LedgerEntry& e : base.ledger.entries())
            if (e.phase == "grad-sync" && e.group == "embedding") {
              ++calls;
              bytes += e.logical_bytes;
            }
          CHECK(calls == 1);
          CHECK(bytes == wte.value_shard_bytes());
          CHECK(wte.partial_groups == std::vector<std::string>{"embedding"});
          // The two copies of wte are the same numbers.
          Communicator& tied = base.mesh->comm("embedding");
          const auto n = static_cast<std::int64_t>(values.at(kWte).size());
          const Tensor mine = base.backend->from_f64(values.at(kWte), {n}, DType::f64, MemCategory::other);
          Tensor theirs = base.backend->empty({n}, DType::f64, MemCategory::other);
          tied.sendrecv(mine, 1 - tied.rank(), theirs, 1 - tied.rank());
          CHECK(base.backend->to_f64(theirs) == values.at(kWte));
          if (world_rank() == 0 && s == 2)
            std::cout << "[zero pipeline] " << c.label() << " pp=2 dp=" << dp << " stage " << stage << ": step 3 error "
                      << err << "\n";
        }
      }
    }
  }
}
