#pragma once
// What of the data-parallel gradient reduction is left after a pipeline stage's last pass, as
// Megatron's interleaved schedule overlaps it chunk by chunk (Megatron-Core r0.8,
// pipeline_parallel/schedules.py, with its default --delay-grad-reduce).
//
// Each model chunk's gradients are reduced once the chunk's last micro-batch is through its backward
// pass (`grad_sync_func` right after that pass on the first stage; delayed on the others so that
// every stage launches together), while the stage still runs the backward passes of the chunks
// below it for the last group of N micro-batches: k·N passes follow chunk k's last one (the chunks'
// backward order is v−1, …, 0, a group of N passes each).  The chunks' reductions run one after
// another on one stream, in that order, so what is left after the stage's last pass is
//
//   max over k = 0 … v−1 of  (k + 1)·C/v − k·N·P/v
//
// with C the stage's whole reduction and P one micro-batch's backward over all v chunks (a chunk's
// pass P/v).  The last chunk's share, C/v, is always left.  One chunk (1F1B or no pipeline): the
// buckets go as they fill during the last micro-batch's backward, so C − P.  Negative when
// everything hides.
//
// The parameters' all-gather (--overlap-param-gather) is not chunked so: Megatron-Core r0.8's
// distributed optimizer gathers one bucket ahead of the forward pass that first uses it, in order
// over every chunk, so each chunk's gather runs under that chunk's own first forward pass and what
// is left is the gather less one micro-batch's forward, as with one chunk.
namespace mdtp::cost {

double chunked_exposure(double collective, double pass, int chunks, int group);

}  // namespace mdtp::cost
