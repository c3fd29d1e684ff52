#pragma once
// The whole-step model as text (people) and JSON (tools): one configuration, a ranked plan, the
// validation against the measured tables.  Every JSON estimate has the keys of docs/performance-model.md
// ("mdtp plan --json"): step_s, tokens_per_s, tflops_per_gpu, mfu, hfu, memory_per_gpu_bytes, fits,
// time {compute_s, tp_comm_s, pp_comm_s, dp_comm_s, bubble_s, optimizer_s}, memory {...},
// config {...}, placement {...}.
#include <string>

#include "cost/measured_tables.hpp"
#include "cost/planner.hpp"
#include "cost/step_model.hpp"

namespace mdtp::cost {

// `data_sheet_bound`, where given: the same step on the cluster at its data sheet (at_data_sheet),
// the fastest the configuration can run on that hardware, shown beside the estimate (`mdtp cost`).
std::string estimate_json(const StepEstimate& estimate, const Cluster& cluster,
                          const StepEstimate* data_sheet_bound = nullptr);
std::string estimate_text(const StepEstimate& estimate, const Cluster& cluster,
                          const StepEstimate* data_sheet_bound = nullptr);

// The first `top` ranked configurations (all when top <= 0).
std::string plan_json(const PlanRequest& request, const PlanResult& result, const Cluster& cluster, int top);
std::string plan_text(const PlanRequest& request, const PlanResult& result, const Cluster& cluster, int top);

// One measured table held against the model (measured_tables.hpp), predicted on `cluster`.
std::string validation_json(const Validation& validation, const Cluster& cluster);
// A Markdown table with its source and rule (docs/performance-model.md holds the output).
std::string validation_text(const Validation& validation, const Cluster& cluster);

}  // namespace mdtp::cost
