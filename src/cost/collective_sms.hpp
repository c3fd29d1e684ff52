#pragma once
// What a collective that runs beside compute takes from it: the SMs its kernels hold.
//
// A collective hidden under compute is not free.  NCCL runs each channel of a collective as one
// CTA on its own SM, and Transformer Engine's userbuffers overlap (Megatron's --tp-comm-overlap)
// runs its "pipeline" and "bulk" kernels on a fixed number of SMs; a GEMM or attention kernel
// running meanwhile has the other SMs only.  For t seconds of such overlap on s of S SMs, the
// compute beside it loses t·s/S seconds' worth of work, which the step pays after it
// (sm_held_seconds).  Copy-engine transfers (TE's "ring exchange" all-gathers) hold none.
//
// NCCL's channels (nccl_channel_sms): its topology search opens channels of a fixed bandwidth each
// (the first speed of its table the link reaches: links.*.channel_bandwidth) until they carry the
// link's bandwidth, n = ⌈B/b⌉, then doubles them (ncclTopoPostset); at most 32 (MAXCHANNELS, the
// default max_ctas).  B is the group's bandwidth as its placement gives it (time_model.hpp: one
// NIC for a group with one GPU per node, k NICs for k GPUs per node, NVLink inside a node), so a
// data-parallel ring over nodes of eight GPUs holds 16 SMs, one over single GPUs per node 2.  The
// search itself may double once more at high speeds; this count is its lower end.
//
// Transformer Engine's userbuffers (kUserbufferSms): 16 SMs (its default `num_sm`) for the
// "pipeline" reduce-scatters of proj and fc2 forward and the "bulk" all-gather and
// reduce-scatter of qkv and fc1 backward; copy engines for the "ring exchange" all-gathers of
// qkv and fc1 forward and of proj and fc2 backward (`use_ce`).  So, of 1D-SP's collectives, every
// reduce-scatter and the backward's re-gather of X hold SMs, the other all-gathers none
// (userbuffers_hold_sms, summed into PassCost::comm_on_sms_seconds).
#include "cost/cost_model.hpp"
#include "cost/time_model.hpp"

namespace mdtp::cost {

inline constexpr int kNcclMaxChannels = 32;  // NCCL's MAXCHANNELS; Hopper's default max_ctas
inline constexpr int kUserbufferSms = 16;    // Transformer Engine's userbuffers `num_sm` default

// Whether Transformer Engine's userbuffers run this 1D-SP collective as an SM kernel ("pipeline",
// "bulk": every reduce-scatter and the re-gather of X), not on the copy engines ("ring exchange").
bool userbuffers_hold_sms(const PlannedCall& call);

// The SMs an NCCL collective on a group spread as `span` holds: 2⌈B/b⌉, at most 32; 0 where the
// model has no channel bandwidth for the span's link class.
int nccl_channel_sms(const GroupSpan& span, const TimeModel& model);

// The seconds of compute lost to `sms` of `sm_count` SMs held for `concurrent_seconds` beside it;
// 0 without an SM count (calibrated or host clusters).
double sm_held_seconds(double concurrent_seconds, int sms, int sm_count);

}  // namespace mdtp::cost
