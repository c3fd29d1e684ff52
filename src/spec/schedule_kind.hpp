#pragma once
// The pipeline schedules by name, without their rules: the run spec names one, and the plans
// (plan/schedule.hpp) build its actions.  "gpipe" | "1f1b" | "interleaved" | "zb-h1" | "zb-h2" |
// "zb-v" | "dualpipev" | "dualpipe".
#include <string_view>
#include <vector>

namespace mdtp {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, zb_v, dualpipev, dualpipe };

// An mdtp::Error naming the value for an unknown name.
ScheduleKind parse_schedule(std::string_view name);
const char* schedule_name(ScheduleKind kind);
// Every schedule, in the order above.
const std::vector<ScheduleKind>& all_schedules();
// "gpipe, 1f1b, ..., dualpipev", for help texts and messages.
const char* schedule_list();

// The V-shaped schedules (zb-v, dualpipev) run two chunks per stage, stage r holding virtual
// stages r and 2p − 1 − r; DualPipe mirrors (below); the others place virtual stages round-robin.
bool is_v_shaped(ScheduleKind kind);
// DualPipe runs two routes: micro-batches fed from both ends, stage r holding the model's positions
// r and p − 1 − r (two copies of the parameters, summed over the `mirror` group).
bool is_mirrored(ScheduleKind kind);
// Chunks per stage a schedule fixes (2 for the V-shaped ones and DualPipe, 1 for gpipe, 1f1b, zb-h1
// and zb-h2), or 0 where the run chooses (interleaved: --chunks).
int fixed_chunks(ScheduleKind kind);

}  // namespace mdtp
