#include "cli/step_options.hpp"

#include "core/error.hpp"
#include "cost/pipeline_bubble.hpp"

namespace mdtp::cli {

cost::StepConfig step_config(const StepChoice& o) {
  require(o.tp * o.pp > 0 && o.gpus % (o.tp * o.pp) == 0, "--gpus ", o.gpus, " must be divisible by tp x pp = ", o.tp,
          " x ", o.pp);
  cost::StepConfig c;
  c.model = o.model;
  c.global_batch = o.global_batch;
  c.micro_batch = o.micro_batch;
  c.mode = o.mode;
  c.tp = o.tp;
  c.depth = o.depth;
  c.pp = o.pp;
  c.dp = o.gpus / (o.tp * o.pp);
  c.schedule = parse_schedule(o.schedule);
  c.chunks = o.chunks;
  c.zero = o.zero;
  c.recompute = cost::parse_recompute(o.recompute);
  c.dtype = o.dtype;
  c.dropout = o.dropout;
  c.overlap = o.overlap;
  c.attention_keeps_probabilities = o.attention_keeps_probabilities;
  c.zero_reduce_per_micro_batch = o.zero_reduce_per_micro_batch;
  c.zero_keep_parameters = o.zero_keep_parameters;
  return c;
}

}  // namespace mdtp::cli
