#pragma once
// CostReport: everything the model says about one configuration — the collective totals with
// predicted times, the GEMMs and their time, memory per rank, and the published asymptotic row
// beside the same ratios computed exactly — as data (for `mdtp bench` to print beside its
// measurements) and as text or JSON (for `mdtp cost`); and the text and JSON of `mdtp cost --zero`
// and `mdtp cost --pipeline`.
#include <string>
#include <vector>

#include "cost/compute_model.hpp"
#include "cost/cost_model.hpp"
#include "cost/memory_model.hpp"
#include "cost/pipeline_bubble.hpp"
#include "cost/published.hpp"
#include "cost/time_model.hpp"
#include "cost/zero.hpp"

namespace mdtp::cost {

// The published table's five quantities computed exactly for the workload, each as a fraction of
// the serial layer's figure (compute, memories), or in stated units (bandwidth, latency).
struct ExactRatios {
  double compute = 0.0;            // rank GEMM flops / serial flops
  double parameter_memory = 0.0;   // rank parameter elements / serial parameter elements
  double activation_memory = 0.0;  // rank kept activations / serial kept activations (bytes)
  double bandwidth = 0.0;          // forward+backward bus bytes / bytes of the full [B, H] activation
  double latency = 0.0;            // forward+backward calls
};

struct CostReport {
  Workload workload;
  int layers = 1;                  // the plan, memory and compute are for `layers` identical layers
  std::string link_source;         // "defaults" or where the calibration came from
  TimeModel model;
  std::vector<PredictedTotals> comm;  // per (phase, group, op), all layers
  std::vector<PlannedGemm> gemms;     // of ONE layer
  double flops = 0.0;                 // all layers
  double compute_seconds = 0.0;       // all layers
  MemoryEstimate memory;              // all layers (kept items listed for one layer)
  PublishedCosts published;
  ExactRatios exact;                  // one layer

  double comm_seconds(const std::string& phase = "") const;  // "" = every phase
};

// `layers` ≥ 1 repeats the layer's plan (the MLP block of an L-layer stack); optimizer bytes per
// parameter as in estimate_memory.
CostReport build_cost_report(const Workload& workload, const TimeModel& model, int layers = 1,
                             double optimizer_bytes_per_param = 0.0, std::string link_source = "defaults");

std::string report_text(const CostReport& report);
std::string report_json(const CostReport& report);

// ZeRO stages 0–3 of one configuration (zero_costs): a table (1 GB = 1e9 B) or JSON.
std::string zero_text(const ZeroPaperInputs& config, const std::vector<ZeroStageCost>& stages);
std::string zero_json(const ZeroPaperInputs& config, const std::vector<ZeroStageCost>& stages);

// The bubble and the peak micro-batches in flight per stage of each schedule (same p and m).
std::string pipeline_text(const std::vector<PipelineConfig>& schedules);
std::string pipeline_json(const std::vector<PipelineConfig>& schedules);

}  // namespace mdtp::cost
