// The kept-activation model against `mdtp train`'s measurement: every rank's peak over the pass
// ends of a step (Σ bytes the contexts in flight hold) equals unit_activation_bytes replayed over
// its stage's schedule (kept_activations), under every TP mode, pp 1 and 2 with each schedule, and
// each recomputation policy.  Without a pipeline, and in the modes that keep no gathered dY, the
// allocator's own `activations` counter at the pass ends equals the model too.  The replay itself
// is checked against the live sums recomputed here from the schedule's actions.  Without a pipeline
// the allocator's own peak inside the steps — the contexts plus the working set of the pass
// running — equals the layers' replay (model/activation_timeline.hpp over plan/activation_peak.hpp)
// to the byte, in every mode, with every recomputation policy and schedule, awkward sizes and
// a vocabulary large enough for the head to set the peak.  Llama's blocks (grouped-query attention,
// SwiGLU, RMSNorm, no position table, tied or untied head) hold the same equalities.
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "support/gpt_harness.hpp"
#include "model/activation_timeline.hpp"
#include "plan/activation_peak.hpp"
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
  bool llama = false;
};

// A Llama of the GPT's sizes: `kv` key/value heads, an MLP of `ffn` (gate|up fused: 2·ffn wide
// before SwiGLU), RMSNorm, no position table, the head tied or not.
ModelShape llama_shape(ModelShape m, std::int64_t kv, std::int64_t ffn, bool tied = false) {
  m.family = ModelFamily::llama;
  m.kv_heads = kv;
  m.ffn_hidden = ffn;
  m.tied_head = tied;
  return m;
}

std::vector<KeptCase> kept_cases(int world) {
  using S = ScheduleKind;
  switch (world) {
    case 1:
      return {{"none", TpMode::none},
              {"none pp1 gpipe m3", TpMode::none, 1, 1, 1, 3, 1, S::gpipe},
              {"llama none", TpMode::none, 1, 1, 1, 1, 1, S::one_f_one_b, true}};
    case 2:
      return {{"1d tp2", TpMode::d1, 2},
              {"1d-sp tp2", TpMode::d1_sp, 2},
              {"none pp2 gpipe m3", TpMode::none, 1, 1, 2, 3, 1, S::gpipe},
              {"none pp2 1f1b m4", TpMode::none, 1, 1, 2, 4, 1, S::one_f_one_b},
              {"none pp2 zb-h1 m3", TpMode::none, 1, 1, 2, 3, 1, S::zb_h1},
              {"none pp2 interleaved v2 m4", TpMode::none, 1, 1, 2, 4, 2, S::interleaved},
              {"llama 1d-sp tp2", TpMode::d1_sp, 2, 1, 1, 1, 1, S::one_f_one_b, true}};
    case 4:
      return {{"2d tp4", TpMode::d2, 4},
              {"1d-sp tp2 pp2 zb-h1 m2", TpMode::d1_sp, 2, 1, 2, 2, 1, S::zb_h1},
              {"1d tp2 pp2 interleaved v2 m4", TpMode::d1, 2, 1, 2, 4, 2, S::interleaved},
              {"llama 1d tp2 pp2 zb-h1 m2", TpMode::d1, 2, 1, 2, 2, 1, S::zb_h1, true}};
    case 8:
      return {{"2.5d tp8 d2", TpMode::d2p5, 8, 2},
              {"3d tp8", TpMode::d3, 8},
              {"2d tp4 pp2 1f1b m2", TpMode::d2, 4, 1, 2, 2, 1, S::one_f_one_b},
              {"llama 3d tp8", TpMode::d3, 8, 1, 1, 1, 1, S::one_f_one_b, true}};
    default: return {};
  }
}

}  // namespace

TEST_CASE("the kept-activation peak of every rank equals the model to the byte", "[memory][activations]") {
  const int world = world_size();
  for (const KeptCase& c : kept_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      TrainConfig t;
      t.spec.layout.mode = c.mode;
      t.spec.layout.tp = c.tp;
      t.spec.layout.depth = c.depth;
      t.spec.layout.pp = c.pp;
      t.spec.layout.schedule = c.schedule;
      t.spec.layout.micro_batches = c.micro_batches;
      t.spec.layout.chunks = c.chunks;
      t.spec.model = ModelShape{4, 32, 4, 16, 0};
      if (c.llama) t.spec.model = llama_shape(t.spec.model, 2, 40);
      const int dp = world / (c.tp * c.pp);
      t.spec.global_batch = 2 * dp * c.micro_batches * (c.mode == TpMode::d3 || c.mode == TpMode::d2p5 ? 2 : 1);
      t.steps = 1;
      t.spec.optimizer.lr = 1e-2;
      std::map<Recompute, std::int64_t> measured;
      for (const Recompute policy :
           {Recompute::none, Recompute::selective, Recompute::full}) {
        TrainConfig r = t;
        r.spec.recompute = policy;
        const TrainResult result = train(r, MPI_COMM_WORLD);
        const TrainResult::KeptActivations& k = result.kept_activations;
        INFO(c.label << " recompute " << recompute_name(policy) << ": measured " << k.measured
                     << " B, model " << k.model << " B, allocator at pass ends " << k.allocator_at_pass_ends << " B");
        CHECK(k.measured > 0);
        CHECK(k.measured == k.model);
        CHECK(k.equal_on_every_rank);
        // The allocator's counter adds what is not in a context (boundary tensors in flight, and
        // it leaves out the gathered dY kept in the communication category): equal without both.
        if (c.pp == 1 && c.mode != TpMode::d1_sp && c.mode != TpMode::d3) CHECK(k.allocator_at_pass_ends == k.model);
        // Inside the passes the counter also holds their working set: modelled without a pipeline.
        CHECK(k.in_step >= k.allocator_at_pass_ends);
        if (c.pp == 1) {
          CHECK(k.in_step == k.in_step_model);
        } else {
          CHECK(k.in_step_model == -1);
        }
        measured[policy] = k.measured;
        if (world_rank() == 0)
          std::cout << "[kept activations] " << c.label << " " << recompute_name(policy) << ": " << k.measured
                    << " B (model " << k.model << " B)\n";
      }
      CHECK(measured[Recompute::selective] <= measured[Recompute::none]);
      CHECK(measured[Recompute::full] <= measured[Recompute::selective]);
    }
  }
}

TEST_CASE("the schedule replay sums the contexts in flight after every pass", "[memory][activations]") {
  // Distinct bytes per unit so that every chunk's sum differs.
  const int n_layer = 4;
  std::vector<UnitKeptBytes> units;
  for (int u = 0; u < n_layer + 2; ++u) units.push_back({1000 + 17 * u, 300 + 5 * u});
  for (const ScheduleKind kind : all_schedules()) {
    const int p = 2, m = 4, v = kind == ScheduleKind::interleaved ? 2 : fixed_chunks(kind);
    const Schedule s = make_schedule(kind, p, m, v);
    const StagePartition partition(n_layer, p, v, {}, s.mapping);
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

namespace {

struct WorkingSetCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, depth = 1, micro_batches = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  ModelShape model{};
  std::int64_t sequences_per_micro_batch = 2;
  DType dtype = DType::f32;
  bool dump_gradients = false;  // assembles full tensors inside the step: not activations
};

// Shapes chosen so that different passes set the peak: a vocabulary far larger than the width (the
// head's logits), a long sequence (the probabilities), several micro-batches in flight (gpipe), a
// split backward (zb-h1), odd widths and f64.
std::vector<WorkingSetCase> working_set_cases(int world) {
  using S = ScheduleKind;
  const ModelShape wide_vocab{2, 24, 4, 8, 997}, long_seq{3, 48, 4, 64, 0}, small{2, 32, 4, 16, 0};
  // Llama: SwiGLU's 2F-wide gate|up beside its F-wide output, RMSNorm's scratch row, no positions.
  const ModelShape llama_small = llama_shape(small, 2, 40), llama_vocab = llama_shape(wide_vocab, 2, 36, true);
  switch (world) {
    case 1:
      return {{"none, vocabulary 997", TpMode::none, 1, 1, 1, S::one_f_one_b, wide_vocab},
              {"none, T 64 f64", TpMode::none, 1, 1, 1, S::one_f_one_b, long_seq, 1, DType::f64},
              {"none gpipe m3", TpMode::none, 1, 1, 3, S::gpipe, small},
              {"none zb-h1 m2", TpMode::none, 1, 1, 2, S::zb_h1, small, 3},
              {"3d on one rank", TpMode::d3, 1, 1, 1, S::one_f_one_b, small},
              {"llama kv1 none zb-h1 m2", TpMode::none, 1, 1, 2, S::zb_h1, llama_shape(small, 1, 40), 3}};
    case 2:
      return {{"1d tp2, vocabulary 997", TpMode::d1, 2, 1, 1, S::one_f_one_b, wide_vocab},
              {"1d-sp tp2, T 64", TpMode::d1_sp, 2, 1, 1, S::one_f_one_b, long_seq},
              {"1d-sp tp2 zb-h1 m2", TpMode::d1_sp, 2, 1, 2, S::zb_h1, small},
              {"none dp2 gpipe m2 f64", TpMode::none, 1, 1, 2, S::gpipe, small, 1, DType::f64},
              {"1d tp2, vocabulary 4999, gradients dumped", TpMode::d1, 2, 1, 1, S::one_f_one_b,
               ModelShape{1, 64, 4, 8, 4999}, 1, DType::f32, true},
              {"llama 1d tp2, vocabulary 997, tied", TpMode::d1, 2, 1, 1, S::one_f_one_b, llama_vocab}};
    case 4:
      return {{"2d tp4, vocabulary 997", TpMode::d2, 4, 1, 1, S::one_f_one_b, wide_vocab},
              {"1d-sp tp4, vocabulary 997", TpMode::d1_sp, 4, 1, 1, S::one_f_one_b, wide_vocab, 4},
              {"2.5d tp4 d1 gpipe m2", TpMode::d2p5, 4, 1, 2, S::gpipe, small},
              {"1d tp2 dp2 zb-h1 m2", TpMode::d1, 2, 1, 2, S::zb_h1, small},
              {"llama 2d tp4 f64", TpMode::d2, 4, 1, 1, S::one_f_one_b, llama_small, 2, DType::f64}};
    case 8:
      return {{"3d tp8, vocabulary 997", TpMode::d3, 8, 1, 1, S::one_f_one_b, wide_vocab, 4},
              {"2.5d tp8 d2, T 64", TpMode::d2p5, 8, 2, 1, S::one_f_one_b, long_seq, 4},
              {"2d tp4 dp2 gpipe m2", TpMode::d2, 4, 1, 2, S::gpipe, small},
              {"llama 2.5d tp8 d2", TpMode::d2p5, 8, 2, 1, S::one_f_one_b, llama_small, 4}};
    default: return {};
  }
}

}  // namespace

TEST_CASE("without a pipeline the allocator's activation peak inside a step equals the layers' replay",
          "[memory][activations]") {
  const int world = world_size();
  static const SharedTempDir dir("mdtp-activations-");  // where the dumping case writes its gradients
  for (const WorkingSetCase& c : working_set_cases(world)) {
    DYNAMIC_SECTION(c.label) {
      for (const Recompute policy :
           {Recompute::none, Recompute::selective, Recompute::full}) {
        TrainConfig t;
        t.spec.layout.mode = c.mode;
        t.spec.layout.tp = c.tp;
        t.spec.layout.depth = c.depth;
        t.spec.layout.schedule = c.schedule;
        t.spec.layout.micro_batches = c.micro_batches;
        t.spec.model = c.model;
        t.spec.precision = precision_for(c.dtype);
        t.spec.recompute = policy;
        if (c.dump_gradients) t.dump_grads = dir.path() + "/grads.h5";
        const int dp = world / c.tp;
        t.spec.global_batch = c.sequences_per_micro_batch * dp * c.micro_batches;
        t.steps = 1;
        t.spec.optimizer.lr = 1e-2;
        const TrainResult result = train(t, MPI_COMM_WORLD);
        const TrainResult::KeptActivations& k = result.kept_activations;
        INFO(c.label << " recompute " << recompute_name(policy) << ": inside a step " << k.in_step
                     << " B, model " << k.in_step_model << " B; kept " << k.measured << " B");
        CHECK(k.in_step > k.allocator_at_pass_ends);  // a working set on top of the contexts
        CHECK(k.in_step == k.in_step_model);
        CHECK(k.measured == k.model);
        CHECK(k.equal_on_every_rank);
        if (world_rank() == 0)
          std::cout << "[activations in step] " << c.label << " " << recompute_name(policy) << ": "
                    << k.in_step << " B (model " << k.in_step_model << " B), kept " << k.measured << " B\n";
      }
    }
  }
}

TEST_CASE("the one-stage activation replay takes each pass above the other micro-batches' contexts",
          "[memory][activations]") {
  // Distinct figures per pass, so that each action's sum is told apart.
  const MicroBatchPassPeaks p{1000, 700, 900, 300, 1100};
  for (const ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
    for (const int m : {1, 2, 3}) {
      const Schedule s = make_schedule(kind, 1, m, 1);
      // Recomputed from the actions: what each micro-batch holds and the top of each pass.
      std::map<int, std::int64_t> held;
      std::int64_t expected = 0;
      auto others = [&](int mb) {
        std::int64_t b = 0;
        for (const auto& [other, bytes] : held)
          if (other != mb) b += bytes;
        return b;
      };
      for (const Action& a : s.actions.front()) {
        const std::int64_t top = a.op == PassKind::F    ? p.forward_peak
                                 : a.op == PassKind::B  ? p.input_peak
                                 : a.op == PassKind::W  ? p.after_input
                                                        : p.fused_peak;  // one stage: BW runs unit by unit
        expected = std::max(expected, others(a.microbatch) + top);
        if (a.op == PassKind::F) held[a.microbatch] = p.after_forward;
        if (a.op == PassKind::B) held[a.microbatch] = p.after_input;
        if (a.op == PassKind::W || a.op == PassKind::BW) held.erase(a.microbatch);
      }
      INFO(schedule_name(kind) << " m" << m);
      CHECK(activation_peak(s, p) == expected);
    }
  }
  // gpipe keeps every forward's context until the backward: m − 1 of them under the last forward.
  CHECK(activation_peak(make_schedule(ScheduleKind::gpipe, 1, 3, 1), p) ==
        std::max<std::int64_t>(2 * 700 + 1000, 2 * 700 + 1100));
  CHECK_THROWS_WITH(activation_peak(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1), p),
                    Catch::Contains("modelled for one stage holding one chunk") && Catch::Contains("got 2 stages"));
}

TEST_CASE("the activation replay keeps what the kept-activation model keeps", "[memory][activations]") {
  // Between passes the replay holds exactly the contexts' activations: every unit's after-forward
  // bytes, and (where no Linear keeps a gathered dY in `communication`) the after-input bytes.
  ActivationShapes a;
  a.dtype_bytes = 4;
  a.seq = 16;
  a.tokens = 48;
  a.residual_rows = 48;
  a.residual_cols = 40;
  a.qkv_rows = 48;
  a.qkv_cols = 60;
  a.core_cols = 20;
  a.local_heads = 2;
  a.mlp_rows = 48;
  a.mlp_cols = 80;
  a.head_gathered_rows = 48;
  a.logits_rows = 48;
  a.vocab_cols = 37;
  for (const bool llama : {false, true})
    for (const bool full : {false, true})
      for (const bool probabilities : {false, true}) {
        // Llama's: the MLP's output half as wide as fc1's gate|up, no position rows, a scratch row in
        // every norm's backward (transient: it changes no figure between passes).
        a.mlp_gate_factor = llama ? 2 : 1;
        a.position_rows = !llama;
        a.norm_scratch_bytes = llama ? a.residual_cols * 4 : 0;
        const KeepPolicy policy{full, probabilities};
        const std::int64_t n_layer = 3;
        const MicroBatchActivationPeaks p = micro_batch_activation_peaks(a, n_layer, policy);
        std::int64_t after_forward = 0, after_input = 0;
        for (const UnitActivationBytes& u : unit_activation_bytes(a, n_layer, policy)) {
          after_forward += u.after_forward;
          after_input += u.after_input;
        }
        INFO("llama " << llama << " full " << full << " probabilities " << probabilities);
        CHECK(p.after_forward == after_forward);
        CHECK(p.after_input == after_input);
        CHECK(p.forward_peak > p.after_forward);  // the residual in hand, at least
      }
}
