// The engine's contract beyond the numbers:
//  - stage 2 starts a bucket's reduce-scatter during backward, as soon as the units writing into
//    it are done: with several buckets, some have started before the embedding's weight pass
//    (the last unit's), none of the embedding's;
//  - hooks attached before the engine keep being called, and are restored when it goes;
//  - stage 3 leaves no parameter value behind between passes;
//  - bad configurations are refused on every rank before any collective, naming the value; calls
//    out of order are refused.
#include <catch2/catch.hpp>

#include <cmath>

#include "mesh/mesh.hpp"
#include "zero_harness.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

// Records, at each grads_ready, how many reductions the engine had started.
class Observer final : public UnitHooks {
 public:
  explicit Observer(const ZeroEngine** engine) : engine_(engine) {}
  std::vector<std::pair<int, std::size_t>> ready;  // (unit, reductions started)
  int forwards = 0;
  void before_forward(int, int) override { ++forwards; }
  void grads_ready(int unit) override { ready.emplace_back(unit, (*engine_)->reductions_started()); }

 private:
  const ZeroEngine** engine_;
};

}  // namespace

TEST_CASE("stage 2 starts reduce-scatters during backward and keeps earlier hooks", "[zero][hooks]") {
  const ModeCase c = zero_cases_for_world(world_size()).front();
  GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
  const ParamMap start = random_parameters(base, 19);
  const ZeroEngine* engine = nullptr;
  Observer observer(&engine);
  GptModel model(*base.mode, base.model->config(), base.model->micro_batch());
  for (ModelParam& p : model.parameters()) scatter_logical(p, start.at(p.name()), p.param->value, *base.mesh, *base.backend);
  model.set_hooks(&observer);
  ZeroConfig z;
  z.stage = 2;
  z.bucket_mb = 0.01;
  {
    ZeroEngine e(z, test_adamw(), model, *base.mesh, *base.backend);
    engine = &e;
    const std::size_t buckets = e.plan().buckets.size();
    REQUIRE(buckets >= 2);
    // The buckets the embedding writes into (unit 0): they can only start after its weight pass.
    std::size_t embedding_buckets = 0;
    for (const Bucket& b : e.plan().buckets)
      if (std::find(b.units.begin(), b.units.end(), 0) != b.units.end()) ++embedding_buckets;
    const TokenBatch batch = step_batch(base, 0);
    e.begin_step();
    forward_backward(model, base.replica_rows(batch.inputs), base.replica_rows(batch.targets));
    CHECK(observer.forwards == unit_count(model.config()));
    const int L = static_cast<int>(model.config().layers);
    REQUIRE(observer.ready.size() == static_cast<std::size_t>(L + 2));
    // grads_ready runs head, blocks L … 1, embedding; the engine starts its buckets before the next
    // hook sees the count.
    const auto [before_embedding_unit, started_before_embedding] = observer.ready[static_cast<std::size_t>(L)];
    CHECK(before_embedding_unit == 1);
    CHECK(started_before_embedding >= 1);
    CHECK(started_before_embedding == buckets - embedding_buckets);
    CHECK(observer.ready.back() == std::pair<int, std::size_t>{0, buckets});
    e.finish_gradients();
    e.step();
  }
  CHECK(model.hooks() == &observer);  // restored
}

TEST_CASE("stage 3 leaves no parameter value between passes", "[zero][hooks]") {
  const ModeCase c = zero_cases_for_world(world_size()).front();
  GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
  const ParamMap start = random_parameters(base, 23);
  for (bool keep : {false, true}) {
    ZeroConfig z;
    z.stage = 3;
    z.keep_parameters = keep;
    ZeroRun run(base, start, z, test_adamw());
    auto none_held = [&] {
      for (const ModelParam& p : run.model->parameters())
        if (p.param->value.defined()) return false;
      return true;
    };
    CHECK(none_held());
    run.step(step_batch(base, 0));
    CHECK(none_held());
    // The model still evaluates (the hooks gather around forward outside a step too).
    const TokenBatch batch = step_batch(base, 1);
    const double loss = whole_model_loss(*run.model, base.replica_rows(batch.inputs), base.replica_rows(batch.targets));
    CHECK(std::isfinite(loss));
    if (keep) {
      CHECK_FALSE(none_held());  // kept until the step's end, or until released
      run.engine->release_parameters();
    }
    CHECK(none_held());
  }
}

TEST_CASE("bad ZeRO configurations are refused on every rank before any collective", "[zero][errors]") {
  const ModeCase c = zero_cases_for_world(world_size()).front();
  GptRun base(c, zero_model(), kReplicaBatch * (c.config.world / c.config.tp));
  const ParamMap start = random_parameters(base, 29);
  struct Bad {
    ZeroConfig zero;
    OptimizerSpec opt;
    const char* message;
  };
  auto zero = [](auto edit) {
    ZeroConfig z;
    edit(z);
    return z;
  };
  // Only a cast makes an unknown kind (names are refused by parse_optimizer_kind).
  OptimizerSpec unknown = test_adamw();
  unknown.kind = static_cast<OptimizerKind>(7);
  OptimizerSpec no_lr = test_adamw();
  no_lr.lr = 0.0;
  const std::vector<Bad> cases = {
      {zero([](ZeroConfig& z) { z.stage = 4; }), test_adamw(), "stage=4"},
      {zero([](ZeroConfig& z) { z.stage = -1; }), test_adamw(), "stage=-1"},
      {zero([](ZeroConfig& z) { z.stage = 2; z.bucket_mb = 0.0; }), test_adamw(), "bucket_mb=0"},
      {zero([](ZeroConfig& z) { z.stage = 2; z.bucket_mb = -3.0; }), test_adamw(), "bucket_mb=-3"},
      {zero([](ZeroConfig& z) { z.stage = 2; z.bucket_mb = std::nan(""); }), test_adamw(), "bucket_mb=nan"},
      {zero([](ZeroConfig& z) { z.stage = 1; z.align_bytes = 12; }), test_adamw(), "align_bytes=12"},
      {zero([](ZeroConfig& z) { z.offload = true; }), test_adamw(), "stage=0 with offload"},
      {zero([](ZeroConfig& z) { z.stage = 2; z.keep_parameters = true; }), test_adamw(), "needs stage 3; got stage=2"},
      {zero([](ZeroConfig& z) { z.stage = 1; z.reduce_per_micro_batch = true; }), test_adamw(),
       "reduce_per_micro_batch reduce-scatters ZeRO-2/3's sharded gradients and needs stage 2 or 3; got stage=1"},
      {zero([](ZeroConfig& z) { z.stage = 1; z.data_parallel_group = "nope"; }), test_adamw(), "nope"},
      {zero([](ZeroConfig& z) { z.stage = 3; }), unknown, "unknown optimizer kind 7"},
      {zero([](ZeroConfig& z) { z.stage = 3; }), no_lr, "learning rate must be positive; got 0"},
  };
  for (const Bad& bad : cases) {
    base.ledger.clear();
    GptModel model(*base.mode, base.model->config(), base.model->micro_batch());
    CHECK_THROWS_WITH(ZeroEngine(bad.zero, bad.opt, model, *base.mesh, *base.backend), Catch::Contains(bad.message));
    CHECK(base.ledger.entries().empty());
    CHECK(model.hooks() == nullptr);
  }
  // Calls out of order.
  ZeroConfig z;
  z.stage = 2;
  ZeroRun run(base, start, z, test_adamw());
  base.ledger.clear();
  CHECK_THROWS_WITH(run.engine->step(), Catch::Contains("finish_gradients() first"));
  CHECK_THROWS_WITH(run.engine->finish_gradients(), Catch::Contains("begin_step()"));
  CHECK_THROWS_WITH(run.engine->gather_full(999, ZeroTensor::value), Catch::Contains("index 999 out of range"));
  CHECK_THROWS_WITH(run.engine->parameter_index("nothing"), Catch::Contains("'nothing'"));
  CHECK(base.ledger.entries().empty());
  OptimizerSpec sgd = test_adamw();
  sgd.kind = OptimizerKind::sgd;
  ZeroRun plain(base, start, z, sgd);
  CHECK_THROWS_WITH(plain.engine->gather_full(0, ZeroTensor::exp_avg), Catch::Contains("the optimizer is sgd"));
  CHECK_THROWS_WITH(plain.engine->load_full(0, ZeroTensor::exp_avg_sq, {}), Catch::Contains("the optimizer is sgd"));
  CHECK(base.ledger.entries().empty());
}
