#pragma once
// The exact bytes of one whole training step, as `mdtp cost --step-bytes` prints them: per
// (phase, group, op) the calls, the logical bytes (the buffer each call moves, as the ledger counts
// it) and the bus bytes (what the algorithm puts on the wire per rank), for the busiest pipeline
// stage, and every stage's totals.  Every rank of a stage issues the same calls, so a stage's plan
// is each of its ranks' — the same numbers `mdtp train` holds its ledger against, at any scale.
#include <string>
#include <vector>

#include "cost/gpt_step_comm.hpp"

namespace mdtp::cost {

// The stage whose ranks move the most logical bytes (the first of equals).
int busiest_stage(const std::vector<StepCommPlan>& stages);

std::string step_bytes_text(const RunSpec& spec, const std::vector<StepCommPlan>& stages);
std::string step_bytes_json(const RunSpec& spec, const std::vector<StepCommPlan>& stages);

}  // namespace mdtp::cost
