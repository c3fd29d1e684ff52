#pragma once
// The action order of ZB-V, the V-shaped zero-bubble pipeline schedule (Qi et al., "Zero Bubble
// Pipeline Parallelism", ICLR 2024, and its V-schedule follow-up).
//
// Stage r of p holds two chunks in V order: chunk 0 is virtual stage r (the first leg, activations
// flowing stage 0 → p−1) and chunk 1 is virtual stage 2p−1−r (the second leg, flowing back
// p−1 → 0), so the loss sits on stage 0.  Every (micro-batch, chunk) runs F (forward), B
// (backward-input pass) and W (weight pass); the backward runs the V the other way round, chunk 1
// from stage 0 down to p−1, then chunk 0 back up.
//
// The order is the one the authors' greedy search builds (PipelineGraph.try_v_schedule, selected
// by create_schedule) in
//   repository  https://github.com/sail-sg/zero-bubble-pipeline-parallelism
//   commit      39f2c186a27580b7051eb51e0f651e1efd0a8170
//   file        megatron/core/pipeline_parallel/zerobubble/scheduler/zbv.py
// at unit costs: F = B = W = 1 time unit, no communication time, and memory counted in contexts
// (an F takes one, B none, W frees it) with a budget of 2p per stage.  Our implementation is our
// own; tests/data/zb_v_unit_orders.json pins its output to the reference's for p = 2..8,
// m = p..4p, action by action.
//
// What it guarantees with unit pass times (each action one unit, starting when its stage is free and
// its input has arrived): the step takes 6m + p − 1 units; once m ≥ 2p − 1 no stage idles between
// its first and last action (stage r is busy from r to r + 6m); and no stage holds more than 2p
// contexts (F run, W not yet).  The tests check this for p = 2..12, m = p..4p and m = 6p + 1.
#include <vector>

#include "plan/schedule.hpp"

namespace mdtp {

// The pass times the greedy plans with, in integer units (the reference's f_cost, b_cost, w_cost).
// The order's guarantees above are for the defaults; other times give the reference's order for
// them too (pinned for a few in tests/data/zb_v_timed_orders.json), with transfers still free and
// the same 2p-context budget.
struct ZbVPassTimes {
  int forward = 1;
  int backward_input = 1;
  int weight = 1;
};

// Each stage's ordered actions (F, B and W only; chunk 0 = virtual stage r, chunk 1 = virtual stage
// 2p − 1 − r).  Needs p ≥ 2 stages, m ≥ p micro-batches and pass times ≥ 1; an mdtp::Error naming
// the value otherwise.
std::vector<std::vector<Action>> zb_v_actions(int stages, int micro_batches, const ZbVPassTimes& times = {});

}  // namespace mdtp
