#include "cost/pipeline_bubble.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace mdtp::cost {

namespace {

// Validated on every call, so a bad configuration never yields a number.
int chunks_of(const PipelineConfig& c) {
  require(c.stages >= 1, "a pipeline needs at least one stage; got p=", c.stages);
  require(c.microbatches >= 1, "a pipeline needs at least one micro-batch; got m=", c.microbatches);
  require(c.chunks >= 1, "a pipeline needs at least one model chunk per stage; got v=", c.chunks);
  if (c.schedule != PipelineSchedule::interleaved) {
    require(c.chunks == 1, "model chunks (v=", c.chunks, ") apply only to the interleaved schedule, not ",
            pipeline_schedule_name(c.schedule));
    return 1;
  }
  require(c.microbatches % c.stages == 0, "interleaved 1F1B needs the micro-batch count to be a multiple of the ",
          "stage count (Megatron's rule); got m=", c.microbatches, ", p=", c.stages);
  return c.chunks;
}

}  // namespace

const char* pipeline_schedule_name(PipelineSchedule schedule) {
  switch (schedule) {
    case PipelineSchedule::gpipe: return "gpipe";
    case PipelineSchedule::one_f_one_b: return "1f1b";
    case PipelineSchedule::interleaved: return "interleaved";
  }
  return "?";
}

double bubble_over_ideal(const PipelineConfig& c) {
  const int v = chunks_of(c);
  return (c.stages - 1.0) / (static_cast<double>(v) * c.microbatches);
}

double bubble_fraction_of_total(const PipelineConfig& c) {
  const int v = chunks_of(c);
  return (c.stages - 1.0) / (static_cast<double>(v) * c.microbatches + c.stages - 1.0);
}

std::vector<int> peak_in_flight(const PipelineConfig& c) {
  const int v = chunks_of(c), p = c.stages, m = c.microbatches;
  std::vector<int> out;
  for (int r = 0; r < p; ++r) {
    switch (c.schedule) {
      case PipelineSchedule::gpipe: out.push_back(m); break;
      case PipelineSchedule::one_f_one_b: out.push_back(std::min(p - r - 1, m) + 1); break;
      case PipelineSchedule::interleaved: {
        const int warmup = m == p ? m * v : std::min(2 * (p - r - 1) + (v - 1) * p, m * v);
        out.push_back(std::min(warmup + 1, m * v));
        break;
      }
    }
  }
  return out;
}

}  // namespace mdtp::cost
