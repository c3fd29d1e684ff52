#include "zero_harness.hpp"

#include <cmath>

#include "mesh/mesh.hpp"
#include "support/whole_model.hpp"

namespace mdtp::testing {

std::vector<ModeCase> zero_cases_for_world(int world) {
  switch (world) {
    case 1: return {mode_case("none", 1, 1)};
    case 2: return {mode_case("none", 2, 1), mode_case("1d", 2, 2)};
    case 3: return {mode_case("none", 3, 1)};
    case 4: return {mode_case("none", 4, 1), mode_case("1d", 4, 2), mode_case("1d-sp", 4, 2)};
    case 8:
      return {mode_case("2d", 8, 4), mode_case("2.5d", 8, 4, 1), mode_case("1d", 8, 2), mode_case("2.5d", 8, 8, 2),
              mode_case("3d", 8, 8)};
    default: return {};
  }
}

std::vector<ModeCase> zero_pipeline_cases_for_world(int world) {
  auto with_pp = [](ModeCase c) {
    c.config.pp = 2;
    return c;
  };
  switch (world) {
    case 2: return {with_pp(mode_case("none", 2, 1))};
    case 4: return {with_pp(mode_case("none", 4, 1))};
    case 8: return {with_pp(mode_case("1d", 8, 2))};
    default: return {};
  }
}

ModelShape zero_model() { return ModelShape{2, 24, 4, 4, 19}; }

TokenBatch step_batch(const GptRun& base, int step) {
  const int dp = base.mesh->comm("dp").size();
  return random_batch(base.model->config(), kReplicaBatch * dp, 500u + static_cast<unsigned>(step));
}

ZeroRun::ZeroRun(const GptRun& base_run, const ParamMap& start, const ZeroConfig& zero, const OptimizerSpec& optimizer,
                 std::vector<UnitRange> chunks)
    : base(base_run) {
  model = std::make_unique<GptModel>(*base.mode, base.model->config(), base.model->micro_batch(), std::move(chunks));
  for (ModelParam& p : model->parameters())
    scatter_logical(p, start.at(p.name()), p.param->value, *base.mesh, *base.backend);
  engine = std::make_unique<ZeroEngine>(zero, optimizer, *model, *base.mesh, *base.backend);
}

double ZeroRun::step(const TokenBatch& batch) {
  engine->begin_step();
  forward_backward(*model, base.replica_rows(batch.inputs), base.replica_rows(batch.targets));
  engine->finish_gradients();
  return engine->step();
}

double ZeroRun::step(const std::vector<TokenBatch>& micro_batches) {
  accumulate(micro_batches);
  return engine->step();
}

void ZeroRun::accumulate(const std::vector<TokenBatch>& micro_batches) {
  const int m = static_cast<int>(micro_batches.size());
  const double scale = model->loss_scale(m);
  engine->begin_step();
  for (int i = 0; i < m; ++i) {
    const std::vector<std::int32_t> inputs = base.replica_rows(micro_batches[static_cast<std::size_t>(i)].inputs);
    const std::vector<std::int32_t> targets = base.replica_rows(micro_batches[static_cast<std::size_t>(i)].targets);
    ChunkSaved saved;
    double sum = 0.0;
    model->chunk(0).forward(Tensor(), MicroBatch{inputs, targets, i}, saved, &sum);
    model->chunk(0).backward(Tensor(), scale, saved, i == m - 1);
  }
  engine->finish_gradients();
}

ParamMap ZeroRun::gather(ZeroTensor what) {
  ParamMap out;
  for (std::size_t i = 0; i < engine->parameters().size(); ++i)
    out[engine->parameters()[i].name()] = engine->gather_full(i, what);
  return out;
}

ParamMap ZeroRun::local(ZeroTensor what) {
  ParamMap out;
  for (std::size_t i = 0; i < engine->parameters().size(); ++i)
    out[engine->parameters()[i].name()] = base.backend->to_f64(engine->tp_shard(i, what));
  return out;
}

namespace {

// max |got − ref| and max |ref| over all elements (infinite on a shape mismatch or a NaN).
std::pair<double, double> max_norms(const ParamMap& got, const ParamMap& ref) {
  double num = 0.0, den = 0.0;
  for (const auto& [name, values] : ref) {
    const auto it = got.find(name);
    if (it == got.end() || it->second.size() != values.size()) return {INFINITY, 1.0};
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (std::isnan(it->second[i])) return {INFINITY, 1.0};
      num = std::max(num, std::abs(it->second[i] - values[i]));
      den = std::max(den, std::abs(values[i]));
    }
  }
  return {num, den};
}

double ratio(double num, double den) { return den > 0.0 ? num / den : num; }

}  // namespace

double max_relative_error(const ParamMap& got, const ParamMap& ref) {
  const auto [num, den] = max_norms(got, ref);
  return ratio(num, den);
}

bool bit_identical(const ParamMap& got, const ParamMap& ref) { return got == ref; }

double max_relative_error_all(const ParamMap& got, const ParamMap& ref) {
  const auto [num, den] = max_norms(got, ref);
  double local[2] = {num, den}, global[2] = {0.0, 0.0};
  MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return ratio(global[0], global[1]);
}

bool bit_identical_all(const ParamMap& got, const ParamMap& ref) {
  int same = got == ref ? 1 : 0, all = 0;
  MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

bool same_sums(const GptRun& base) {
  if (base.mesh->comm("dp").size() > 2) return false;
  for (const ModelParam& p : base.model->parameters())
    for (const std::string& g : p.param->partial_grad_over)
      if (base.mesh->comm(g).size() > 1) return false;
  return true;
}

OptimizerSpec test_adamw(double grad_clip) {
  OptimizerSpec c;
  c.kind = OptimizerKind::adamw;
  c.lr = 1e-2;
  c.grad_clip = grad_clip;
  return c;
}

}  // namespace mdtp::testing
