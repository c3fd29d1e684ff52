// The GPT model as units in chunks, with per-micro-batch state, in every mode (worlds up to 8
// ranks; f64):
//  - several micro-batches in flight, passes in any order, equal running them one after another
//    (loss sums bit for bit; accumulated gradients ≤ 1e-13, summed in another order);
//  - a model cut into chunks, in one object or in two (the second with its own copy of the tied
//    wte, as a pipeline's last stage has), computes exactly what the whole model computes; the two
//    wte gradients add up to the whole model's;
//  - the backward-input pass then the weight pass equals the fused backward, with every weight
//    overwritten by NaN in between;
//  - the unit hooks fire in the documented order, grads_ready only after a step's last W.
#include <catch2/catch.hpp>

#include <limits>
#include <map>

#include "support/gpt_harness.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

using Grads = std::map<std::string, std::vector<double>>;

Grads local_grads(const GptModel& model, const Backend& backend) {
  Grads out;
  for (const ModelParam& p : model.parameters()) out[p.name()] = backend.to_f64(p.param->grad);
  return out;
}

double worst_error(const Grads& got, const Grads& ref) {
  double worst = 0.0;
  for (const auto& [name, values] : ref) worst = std::max(worst, relative_error(got.at(name), values));
  return worst;
}

// The micro-batches of a step: m of b sequences per replica, this replica's rows of each.
struct Step {
  std::vector<std::vector<std::int32_t>> inputs, targets;
  MicroBatch micro_batch(int i) const {
    return MicroBatch{inputs[static_cast<std::size_t>(i)], targets[static_cast<std::size_t>(i)], i};
  }
};

Step make_step(const GptRun& run, int m, unsigned seed) {
  Step s;
  const int dp = run.mesh->comm("dp").size();
  for (int i = 0; i < m; ++i) {
    const TokenBatch batch = random_batch(run.model->config(), run.model->micro_batch() * dp, seed + static_cast<unsigned>(i));
    s.inputs.push_back(run.replica_rows(batch.inputs));
    s.targets.push_back(run.replica_rows(batch.targets));
  }
  return s;
}

std::vector<ModeCase> chunk_cases() {
  const int world = world_size();
  return world <= 8 ? model_cases_for_world(world) : std::vector<ModeCase>{};
}

// "F3.1": event F of unit 3, micro-batch 1 (appended piecewise: GCC 12's -Wrestrict misfires on
// chained std::string operator+, PR 105329).
std::string event(char kind, int unit, int microbatch = -1) {
  std::string s(1, kind);
  s += std::to_string(unit);
  if (microbatch >= 0) {
    s += '.';
    s += std::to_string(microbatch);
  }
  return s;
}

class RecordingHooks final : public UnitHooks {
 public:
  std::vector<std::string> calls;
  void before_forward(int u, int mb) override { calls.push_back(event('F', u, mb)); }
  void after_forward(int u, int mb) override { calls.push_back(event('f', u, mb)); }
  void before_backward_input(int u, int mb) override { calls.push_back(event('B', u, mb)); }
  void after_backward_input(int u, int mb) override { calls.push_back(event('b', u, mb)); }
  void grads_ready(int u) override { calls.push_back(event('G', u)); }
};

}  // namespace

TEST_CASE("micro-batches in flight through the model equal running them one after another", "[model][chunks]") {
  const ModelSize size = model_size_for_world(world_size());
  for (const ModeCase& c : chunk_cases()) {
    DYNAMIC_SECTION(c.label()) {
      const int dp = c.config.world / c.config.tp;
      GptRun one(c, size.config, size.batch), many(c, size.config, size.batch);
      const int m = 3;
      const Step step = make_step(one, m, 70);
      const double scale = one.model->loss_scale(m);
      ModelChunk& a = one.model->chunk(0);
      ModelChunk& b = many.model->chunk(0);
      std::vector<double> sums_one(m), sums_many(m);
      for (int i = 0; i < m; ++i) {
        ChunkSaved saved;
        a.forward(Tensor(), step.micro_batch(i), saved, &sums_one[static_cast<std::size_t>(i)]);
        a.backward(Tensor(), scale, saved, i == m - 1);
      }
      std::vector<ChunkSaved> saved(m);
      for (int i = 0; i < m; ++i) b.forward(Tensor(), step.micro_batch(i), saved[static_cast<std::size_t>(i)], &sums_many[static_cast<std::size_t>(i)]);
      b.backward_input(Tensor(), scale, saved[2]);
      b.backward_input(Tensor(), scale, saved[0]);
      b.backward_weight(saved[0]);
      b.backward(Tensor(), scale, saved[1]);
      b.backward_weight(saved[2], true);
      CHECK(sums_many == sums_one);
      const double err = worst_error(local_grads(*many.model, *many.backend), local_grads(*one.model, *one.backend));
      INFO("dp " << dp << ": worst gradient difference " << err);
      CHECK(err <= 1e-13);
      // The step's loss is reduced once, from the local sums.
      double local = 0.0;
      for (double s : sums_one) local += s;
      const double loss = one.model->reduce_loss(local, m);
      CHECK(std::isfinite(loss));
      CHECK(loss > 0.0);
    }
  }
}

TEST_CASE("a model cut into chunks computes what the whole model computes", "[model][chunks]") {
  const ModelSize size = model_size_for_world(world_size());
  const int L = static_cast<int>(size.config.layers);
  REQUIRE(L >= 2);
  for (const ModeCase& c : chunk_cases()) {
    DYNAMIC_SECTION(c.label()) {
      GptRun whole(c, size.config, size.batch);
      const Step step = make_step(whole, 1, 90);
      const MicroBatch mb = step.micro_batch(0);
      const double scale = whole.model->loss_scale(1);
      const std::int64_t b = whole.model->micro_batch();
      double whole_sum = 0.0;
      {
        ChunkSaved saved;
        whole.model->chunk(0).forward(Tensor(), mb, saved, &whole_sum);
        whole.model->chunk(0).backward(Tensor(), scale, saved, true);
      }
      const Grads whole_grads = local_grads(*whole.model, *whole.backend);

      // One object, two chunks: [embedding, block 0] and [block 1 … head].
      GptModel split(*whole.mode, size.config, b, {UnitRange{0, 1}, UnitRange{2, L + 1}});
      double split_sum = 0.0;
      ChunkSaved s0, s1;
      Tensor h = split.chunk(0).forward(Tensor(), mb, s0);
      split.chunk(1).forward(h, mb, s1, &split_sum);
      split.chunk(0).backward(split.chunk(1).backward(Tensor(), scale, s1), scale, s0);
      CHECK(split_sum == whole_sum);
      CHECK(local_grads(split, *whole.backend) == whole_grads);

      // Two objects, as two pipeline stages: the second holds the head with its own wte copy.
      GptModel first(*whole.mode, size.config, b, {UnitRange{0, 1}});
      GptModel last(*whole.mode, size.config, b, {UnitRange{2, L + 1}});
      CHECK_FALSE(last.holds(0));
      const Tensor& wte_first = first.unit_parameters(0).front().param->value;
      const Tensor& wte_last = last.unit_parameters(L + 1).front().param->value;
      REQUIRE(last.unit_parameters(L + 1).front().name() == "transformer.wte.weight");
      CHECK(whole.backend->to_f64(wte_last) == whole.backend->to_f64(wte_first));  // tied copies start equal
      double stage_sum = 0.0;
      ChunkSaved t0, t1;
      Tensor boundary = first.chunk(0).forward(Tensor(), mb, t0);
      last.chunk(0).forward(boundary, mb, t1, &stage_sum);
      first.chunk(0).backward(last.chunk(0).backward(Tensor(), scale, t1), scale, t0);
      CHECK(stage_sum == whole_sum);
      Grads stages = local_grads(first, *whole.backend);
      const Grads last_grads = local_grads(last, *whole.backend);
      std::vector<double> wte = stages.at("transformer.wte.weight");
      const std::vector<double>& wte_head = last_grads.at("transformer.wte.weight");
      for (std::size_t i = 0; i < wte.size(); ++i) wte[i] += wte_head[i];
      for (const auto& [name, g] : last_grads) stages[name] = g;
      stages["transformer.wte.weight"] = wte;
      const double err = worst_error(stages, whole_grads);
      INFO("tied wte summed from the two copies: worst difference " << err);
      CHECK(err <= 1e-13);
      Grads exact = stages;
      exact.erase("transformer.wte.weight");
      Grads exact_ref = whole_grads;
      exact_ref.erase("transformer.wte.weight");
      CHECK(exact == exact_ref);
      // A boundary activation of the wrong shape is refused before any collective.
      ChunkSaved bad;
      whole.ledger.clear();
      CHECK_THROWS_WITH(last.chunk(0).forward(Tensor(), mb, bad), Catch::Contains("residual stream"));
      CHECK(whole.ledger.entries().empty());
    }
  }
}

TEST_CASE("the model's backward-input then weight pass equals the fused backward and reads no weights",
          "[model][chunks]") {
  const ModelSize size = model_size_for_world(world_size());
  for (const ModeCase& c : chunk_cases()) {
    DYNAMIC_SECTION(c.label()) {
      GptRun fused(c, size.config, size.batch), split(c, size.config, size.batch);
      const Step step = make_step(fused, 1, 110);
      const double scale = fused.model->loss_scale(1);
      ChunkSaved a, b;
      fused.model->chunk(0).forward(Tensor(), step.micro_batch(0), a);
      fused.model->chunk(0).backward(Tensor(), scale, a, true);
      split.model->chunk(0).forward(Tensor(), step.micro_batch(0), b);
      split.model->chunk(0).backward_input(Tensor(), scale, b);
      for (const ModelParam& p : split.model->parameters())
        split.backend->fill(p.param->value, std::numeric_limits<double>::quiet_NaN());
      split.model->chunk(0).backward_weight(b, true);
      CHECK(local_grads(*split.model, *split.backend) == local_grads(*fused.model, *fused.backend));
    }
  }
}

TEST_CASE("unit hooks fire in order, and gradients are ready only after the step's last weight pass",
          "[model][chunks]") {
  const ModelSize size = model_size_for_world(1);
  GptRun run(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const int L = static_cast<int>(size.config.layers);
  GptModel model(*run.mode, size.config, run.model->micro_batch(), {UnitRange{0, 1}, UnitRange{2, L + 1}});
  RecordingHooks hooks;
  model.set_hooks(&hooks);
  const Step step = make_step(run, 2, 130);
  const double scale = model.loss_scale(2);
  std::vector<ChunkSaved> s0(2), s1(2);
  for (int i = 0; i < 2; ++i) {
    const Tensor h = model.chunk(0).forward(Tensor(), step.micro_batch(i), s0[static_cast<std::size_t>(i)]);
    double sum = 0.0;
    model.chunk(1).forward(h, step.micro_batch(i), s1[static_cast<std::size_t>(i)], &sum);
  }
  for (int i = 0; i < 2; ++i) {
    const bool last = i == 1;
    const Tensor d = model.chunk(1).backward(Tensor(), scale, s1[static_cast<std::size_t>(i)], last);
    model.chunk(0).backward(d, scale, s0[static_cast<std::size_t>(i)], last);
  }
  std::vector<std::string> want;
  for (int i = 0; i < 2; ++i)
    for (int u = 0; u <= L + 1; ++u) {
      want.push_back(event('F', u, i));
      want.push_back(event('f', u, i));
    }
  // The fused backward runs unit by unit: each unit's backward-input pass, then its weight pass,
  // whose end on the step's last micro-batch makes the unit's gradients complete.
  for (int i = 0; i < 2; ++i)
    for (int u = L + 1; u >= 0; --u) {
      want.push_back(event('B', u, i));
      want.push_back(event('b', u, i));
      if (i == 1) want.push_back(event('G', u));
    }
  CHECK(hooks.calls == want);
}

TEST_CASE("chunks that overlap, leave the model or come out of order are refused", "[model][chunks][errors]") {
  const ModelSize size = model_size_for_world(1);
  GptRun run(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const int L = static_cast<int>(size.config.layers);
  const std::int64_t b = run.model->micro_batch();
  CHECK_THROWS_WITH(GptModel(*run.mode, size.config, b, {UnitRange{0, 1}, UnitRange{1, L + 1}}),
                    Catch::Contains("overlap or are out of order"));
  CHECK_THROWS_WITH(GptModel(*run.mode, size.config, b, {UnitRange{0, L + 2}}),
                    Catch::Contains("inside [0, " + std::to_string(L + 1) + "]"));
  CHECK_THROWS_WITH(GptModel(*run.mode, size.config, b, {UnitRange{2, L + 1}, UnitRange{0, 1}}),
                    Catch::Contains("out of order"));
  GptModel middle(*run.mode, size.config, b, {UnitRange{1, 1}});
  const Step step = make_step(run, 1, 150);
  ChunkSaved saved;
  CHECK_THROWS_WITH(forward_backward(middle, step.inputs[0], step.targets[0]), Catch::Contains("pipeline split"));
}
