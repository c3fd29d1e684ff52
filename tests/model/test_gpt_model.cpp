// The GPT model in every tensor-parallel mode against the serial model (mode none, computed on
// every rank over MPI_COMM_SELF), which is itself checked against an independent plain-loop loss
// and against central finite differences.  f64 throughout; ‖Δ‖∞ / ‖ref‖∞.
#include <catch2/catch.hpp>
#include <iostream>

#include "support/gpt_harness.hpp"
#include "modes/registry.hpp"
#include "support/whole_model.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

double max_error(const ParamMap& got, const ParamMap& ref, std::string* worst = nullptr) {
  double err = 0.0;
  for (const auto& [name, values] : ref) {
    const double e = relative_error(got.at(name), values);
    if (e >= err) {
      err = e;
      if (worst) *worst = name;
    }
  }
  return err;
}

}  // namespace

TEST_CASE("the serial GPT's loss matches an independent plain-loop GPT-2", "[model][reference]") {
  const ModelSize size = model_size_for_world(1);
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const TokenBatch batch = random_batch(size.config, size.batch, 5);
  for (int variant = 0; variant < 2; ++variant) {
    if (variant == 1) serial.set(random_parameters(serial, 6));
    const double loss = whole_model_loss(*serial.model, batch.inputs, batch.targets);
    const double ref = gpt_reference_loss(size.config, serial.gather(false), batch.inputs, batch.targets);
    INFO("variant " << variant << ": loss " << loss << ", reference " << ref);
    CHECK(std::abs(loss - ref) <= 1e-12 * std::abs(ref));
  }
}

TEST_CASE("GPT gradients match central finite differences of the loss", "[model][gradcheck]") {
  if (world_size() != 1) return;  // serial maths: checked once
  const ModelShape config{2, 8, 2, 3, 7};
  GptRun run(serial_case(), config, 2, MPI_COMM_SELF);
  run.set(random_parameters(run, 11, 0.3));
  const TokenBatch batch = random_batch(config, 2, 12);
  forward_backward(*run.model, batch.inputs, batch.targets);
  const double h = 1e-5;
  double worst = 0.0;
  for (const ModelParam& p : run.model->parameters()) {
    const std::vector<double> grad = run.backend->to_f64(p.param->grad);
    std::vector<double> value = run.backend->to_f64(p.param->value), fd(value.size());
    for (std::size_t i = 0; i < value.size(); ++i) {
      const double keep = value[i];
      value[i] = keep + h;
      run.backend->assign_f64(p.param->value, value);
      const double up = whole_model_loss(*run.model, batch.inputs, batch.targets);
      value[i] = keep - h;
      run.backend->assign_f64(p.param->value, value);
      const double down = whole_model_loss(*run.model, batch.inputs, batch.targets);
      value[i] = keep;
      fd[i] = (up - down) / (2 * h);
    }
    run.backend->assign_f64(p.param->value, value);
    const double err = relative_error(grad, fd);
    worst = std::max(worst, err);
    INFO(p.name() << ": analytic vs finite-difference gradient, relative error " << err);
    CHECK(err <= 1e-6);
  }
  std::cout << "[model] largest finite-difference gradient error: " << worst << "\n";
}

TEST_CASE("every mode gives the serial GPT's initial values, loss and gradients", "[model][modes]") {
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  const TokenBatch batch = random_batch(size.config, size.batch, 21);
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const ParamMap init = serial.gather(false);
  const ParamMap values = random_parameters(serial, 22);
  serial.set(values);
  const double ref_loss = serial.step(batch);
  const ParamMap ref_grads = serial.gather(true);
  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label() << " dp=" << world / c.config.tp) {
      GptRun run(c, size.config, size.batch);
      std::string worst;
      CHECK(max_error(run.gather(false), init, &worst) == 0.0);  // same draws by logical index
      run.set(values);
      const double loss = run.step(batch);
      const double loss_err = std::abs(loss - ref_loss) / std::abs(ref_loss);
      const double grad_err = max_error(run.gather(true), ref_grads, &worst);
      INFO("loss " << loss << " vs " << ref_loss << "; worst gradient " << worst);
      CHECK(loss_err <= 1e-10);
      CHECK(grad_err <= 1e-10);
      if (mdtp::testing::world_size() > 0 && run.mesh->rank() == 0)
        std::cout << "[model] " << c.label() << " dp=" << world / c.config.tp << ": loss " << loss << ", loss error "
                  << loss_err << ", largest gradient error " << grad_err << " (" << worst << ")\n";
    }
  }
}

TEST_CASE("every mode in f32 stays within f32 rounding of the f64 serial GPT", "[model][modes][f32]") {
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  const TokenBatch batch = random_batch(size.config, size.batch, 21);
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const ParamMap values = random_parameters(serial, 22);
  serial.set(values);
  const double ref_loss = serial.step(batch);
  const ParamMap ref_grads = serial.gather(true);
  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label()) {
      GptRun run(c, size.config, size.batch, MPI_COMM_WORLD, DType::f32);
      run.set(values);
      const double loss = run.step(batch);
      std::string worst;
      const double grad_err = max_error(run.gather(true), ref_grads, &worst);
      INFO("loss " << loss << " vs " << ref_loss << "; worst gradient " << worst << " " << grad_err);
      CHECK(std::abs(loss - ref_loss) <= 1e-5 * std::abs(ref_loss));
      CHECK(grad_err <= 1e-4);
    }
  }
}

TEST_CASE("padded vocabulary entries never win the softmax", "[model][vocab]") {
  // Real logits all strongly negative (wte = -1, ln_f β = 1 gives logit -H on every real entry):
  // a padded entry (logit 0) would win if it were not masked.
  const int world = world_size();
  const ModelSize size = model_size_for_world(world);
  const TokenBatch batch = random_batch(size.config, size.batch, 31);
  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label()) {
      GptRun run(c, size.config, size.batch);
      ParamMap values = random_parameters(run, 32);
      for (auto& v : values.at("transformer.wte.weight")) v = -1.0;
      for (auto& v : values.at("transformer.ln_f.bias")) v = 1.0;
      run.set(values);
      const double loss = run.step(batch);
      const double ref = gpt_reference_loss(size.config, values, batch.inputs, batch.targets);
      INFO("vocabulary padded to " << run.model->split().padded_vocab(size.config.vocab));
      CHECK(std::abs(loss - ref) <= 1e-10 * std::abs(ref));
    }
  }
}

TEST_CASE("configurations the mesh cannot split are refused on every rank before any collective", "[model][errors]") {
  const int world = world_size();
  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label()) {
      const ModelSize size = model_size_for_world(world);
      const int dp = world / c.config.tp;
      CommLedger ledger;
      auto backend = make_host_backend();
      Mesh mesh(c.config, MPI_COMM_WORLD, ledger);
      auto mode = make_tp_mode(c.mode, TpContext{mesh, *backend, DType::f64, 1, {}});
      GptRun probe(c, size.config, size.batch);
      const Layout qkv = probe.mode->linear(LinearSpec{"probe", size.config.hidden, 3 * size.config.hidden},
                                            probe.mode->residual_layout())->output_layout();
      const int g = qkv.col_groups.empty() ? 1 : mesh.comm(qkv.col_groups[0]).size();
      ledger.clear();
      if (g > 1) {
        ModelShape bad = size.config;
        bad.heads = g + 1;
        bad.hidden = size.config.hidden * (g + 1);
        CHECK_THROWS_WITH(GptModel(*mode, bad, size.batch / dp),
                          Catch::Contains("n_head=" + std::to_string(g + 1)) &&
                              Catch::Contains("divisible by the " + std::to_string(g)));
      }
      std::int64_t row_blocks = 1;
      for (const auto& group : qkv.row_groups) row_blocks *= mesh.comm(group).size();
      if (row_blocks > 1) {
        CHECK_THROWS_WITH(GptModel(*mode, size.config, 1), Catch::Contains("per-replica batch of 1") ||
                                                                 Catch::Contains("must be divisible by the row split"));
      }
      if (c.config.tp > 1 && !mode->residual_layout().row_groups.empty()) {
        ModelShape odd = size.config;
        odd.seq = 3;
        odd.hidden = size.config.hidden;
        const std::int64_t rows_unit = mesh.comm(spanning_group(mode->residual_layout().row_groups)).size();
        if (rows_unit % 3 != 0)
          CHECK_THROWS_WITH(GptModel(*mode, odd, 1), Catch::Contains("token rows") || Catch::Contains("per-replica"));
      }
      CHECK_THROWS_WITH(GptModel(*mode, ModelShape{2, 24, 5, 4, 19}, 1), Catch::Contains("n_embd=24") &&
                                                                             Catch::Contains("n_head=5"));
      CHECK(ledger.entries().empty());
    }
  }
}

TEST_CASE("an untied head (lm_head.weight of its own) in every mode gives the serial GPT's loss and gradients",
          "[model][modes][untied]") {
  const int world = world_size();
  ModelSize size = model_size_for_world(world);
  size.config.tied_head = false;
  const TokenBatch batch = random_batch(size.config, size.batch, 41);
  GptRun serial(serial_case(), size.config, size.batch, MPI_COMM_SELF);
  const ParamMap values = random_parameters(serial, 42);
  REQUIRE(values.count("lm_head.weight") == 1);
  serial.set(values);
  const double ref_loss = serial.step(batch);
  // The serial model against the plain-loop GPT-2 whose logits are x·lm_headᵀ.
  const double plain = gpt_reference_loss(size.config, values, batch.inputs, batch.targets);
  CHECK(std::abs(ref_loss - plain) <= 1e-12 * std::abs(plain));
  const ParamMap ref_grads = serial.gather(true);

  // With lm_head.weight = wte the untied model is the tied one: the same loss, and the tied wte's
  // gradient is the sum of the untied embedding's and head's.
  if (world == 1) {
    ModelShape tied_config = size.config;
    tied_config.tied_head = true;
    GptRun tied(serial_case(), tied_config, size.batch, MPI_COMM_SELF);
    ParamMap tied_values = values;
    tied_values.erase("lm_head.weight");
    tied.set(tied_values);
    GptRun untied(serial_case(), size.config, size.batch, MPI_COMM_SELF);
    ParamMap same_head = values;
    same_head.at("lm_head.weight") = values.at("transformer.wte.weight");
    untied.set(same_head);
    const double untied_loss = untied.step(batch), tied_loss = tied.step(batch);
    CHECK(std::abs(untied_loss - tied_loss) <= 1e-13 * std::abs(tied_loss));
    const ParamMap untied_grads = untied.gather(true), tied_grads = tied.gather(true);
    std::vector<double> sum = untied_grads.at("transformer.wte.weight");
    const std::vector<double>& head = untied_grads.at("lm_head.weight");
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += head[i];
    CHECK(relative_error(sum, tied_grads.at("transformer.wte.weight")) <= 1e-13);
    CHECK(relative_error(untied_grads.at("transformer.h.0.mlp.c_fc.weight"),
                         tied_grads.at("transformer.h.0.mlp.c_fc.weight")) <= 1e-13);
  }

  for (const ModeCase& c : model_cases_for_world(world)) {
    DYNAMIC_SECTION(c.label() << " untied") {
      GptRun run(c, size.config, size.batch);
      run.set(values);
      const double loss = run.step(batch);
      std::string worst;
      const double grad_err = max_error(run.gather(true), ref_grads, &worst);
      INFO("loss " << loss << " vs " << ref_loss << "; worst gradient " << worst << " " << grad_err);
      CHECK(std::abs(loss - ref_loss) <= 1e-10 * std::abs(ref_loss));
      CHECK(grad_err <= 1e-10);
    }
  }
}
