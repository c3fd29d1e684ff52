// The kept-activation model against `mdtp train`'s measurement: every rank's peak over the pass
// ends of a step (Σ bytes the contexts in flight hold) equals unit_activation_bytes replayed over
// its stage's schedule (kept_activations), under every TP mode, pp 1 and 2 with each schedule, and
// each recomputation policy.  Without a pipeline, and in the modes that keep no gathered dY, the
// allocator's own `activations` counter at the pass ends equals the model too.  The replay itself
// is checked against the live sums recomputed here from the schedule's actions.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "model/gpt_harness.hpp"
#include "plan/kept_activations.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct KeptCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, pp = 1, micro_batches = 1, chunks = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
};

std::vector<KeptCase> kept_cases(int world) {
  using S = ScheduleKind;
  switch (world) {
    case 1: return {{"none", TpMode::none}, {"none pp1 gpipe m3", TpMode::none, 1, 1, 1, 3, 1, S::gpipe}};
    case 2:
      return {{"1d tp2", TpMode::d1, 2},
              {"1d-sp tp2", TpMode::d1_sp, 2},
              {"none pp2 gpipe m3", TpMode::none, 1, 1, 2, 3, 1, S::gpipe},
              {"none pp2 1f1b m4", TpMode::none, 1, 1, 2, 4, 1, S::one_f_one_b},
              {"none pp2 zb-h1 m3", TpMode::none, 1, 1, 2, 3, 1, S::zb_h1},
              {"none pp2 interleaved v2 m4", TpMode::none, 1, 1, 2, 4, 2, S::interleaved}};
    case 4:
      return {{"2d tp4", TpMode::d2, 4},
              {"1d-sp tp2 pp2 zb-h1 m2", TpMode::d1_sp, 2, 1, 2, 2, 1, S::zb_h1},
              {"1d tp2 pp2 interleaved v2 m4", TpMode::d1, 2, 1, 2, 4, 2, S::interleaved}};
    case 8:
      return {{"2.5d tp8 d2", TpMode::d2p5, 8, 2},
              {"3d tp8", TpMode::d3, 8},
              {"2d tp4 pp2 1f1b m2", TpMode::d2, 4, 1, 2, 2, 1, S::one_f_one_b}};
    default: return {};
  }
}

}  // namespace

TEST_CASE("the kept-activation peak of every rank equals the model to the byte", "[memory][activations]") {
  const int world = world_size();
  for (const KeptCase& c : kept_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      TrainConfig t;
      t.tp_mode = c.mode;
      t.tp = c.tp;
      t.tp_depth = c.depth;
      t.pp = c.pp;
      t.schedule = c.schedule;
      t.micro_batches = c.micro_batches;
      t.chunks = c.chunks;
      t.model = GptConfig{0, 4, 4, 32, 16};
      const int dp = world / (c.tp * c.pp);
      t.batch = 2 * dp * c.micro_batches * (c.mode == TpMode::d3 || c.mode == TpMode::d2p5 ? 2 : 1);
      t.steps = 1;
      t.optimizer.lr = 1e-2;
      std::map<ActivationRecompute, std::int64_t> measured;
      for (const ActivationRecompute policy :
           {ActivationRecompute::none, ActivationRecompute::selective, ActivationRecompute::full}) {
        TrainConfig r = t;
        r.recompute = policy;
        const TrainResult result = train(r, MPI_COMM_WORLD);
        const TrainResult::KeptActivations& k = result.kept_activations;
        INFO(c.label << " recompute " << activation_recompute_name(policy) << ": measured " << k.measured
                     << " B, model " << k.model << " B, allocator at pass ends " << k.allocator_at_pass_ends << " B");
        CHECK(k.measured > 0);
        CHECK(k.measured == k.model);
        CHECK(k.equal_on_every_rank);
        // The allocator's counter adds what is not in a context (boundary tensors in flight, and
        // it leaves out the gathered dY kept in the communication category): equal without both.
        if (c.pp == 1 && c.mode != TpMode::d1_sp && c.mode != TpMode::d3) CHECK(k.allocator_at_pass_ends == k.model);
        measured[policy] = k.measured;
        if (world_rank() == 0)
          std::cout << "[kept activations] " << c.label << " " << activation_recompute_name(policy) << ": " << k.measured
                    << " B (model " << k.model << " B)\n";
      }
      CHECK(measured[ActivationRecompute::selective] <= measured[ActivationRecompute::none]);
      CHECK(measured[ActivationRecompute::full] <= measured[ActivationRecompute::selective]);
    }
  }
}

TEST_CASE("the schedule replay sums the contexts in flight after every pass", "[memory][activations]") {
  // Distinct bytes per unit so that every chunk's sum differs.
  const int n_layer = 4;
  std::vector<UnitKeptBytes> units;
  for (int u = 0; u < n_layer + 2; ++u) units.push_back({1000 + 17 * u, 300 + 5 * u});
  for (const ScheduleKind kind :
       {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1, ScheduleKind::interleaved}) {
    const int p = 2, m = 4, v = kind == ScheduleKind::interleaved ? 2 : 1;
    const Schedule s = make_schedule(kind, p, m, v);
    const StagePartition partition(n_layer, p, v);
    for (int stage = 0; stage < p; ++stage) {
      const KeptActivations k = kept_activations(s, partition, stage, units);
      // Recompute the live sums from the actions: per (micro-batch, chunk) the state it is in.
      std::map<std::pair<int, int>, char> state;  // 'F' after forward, 'B' after input
      auto chunk_bytes = [&](int chunk, char st) {
        const UnitSpan span = partition.stage_units(stage)[static_cast<std::size_t>(chunk)];
        std::int64_t b = 0;
        for (int u = span.first; u <= span.last; ++u)
          b += st == 'F' ? units[static_cast<std::size_t>(u)].after_forward : units[static_cast<std::size_t>(u)].after_input;
        return b;
      };
      auto live = [&] {
        std::int64_t b = 0;
        for (const auto& [key, st] : state) b += chunk_bytes(key.second, st);
        return b;
      };
      std::vector<std::int64_t> expected;
      for (const Action& a : s.actions[static_cast<std::size_t>(stage)]) {
        const std::pair<int, int> key{a.microbatch, a.chunk};
        if (a.op == PassKind::F) state[key] = 'F';
        if (a.op == PassKind::B || a.op == PassKind::BW) state[key] = 'B';
        // A fused backward that runs unit by unit (virtual stage 0) has no pass end between B and W.
        if (a.op == PassKind::BW && !fused_backward_unit_by_unit(s, stage, a.chunk)) expected.push_back(live());
        if (a.op == PassKind::W || a.op == PassKind::BW) state.erase(key);
        expected.push_back(live());
      }
      INFO(schedule_name(kind) << " stage " << stage);
      CHECK(k.after_pass == expected);
      CHECK(k.peak == *std::max_element(expected.begin(), expected.end()));
      CHECK(expected.back() == 0);
    }
  }
}
