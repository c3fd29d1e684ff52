#pragma once
// The pipeline schedules by name, without their rules: the run spec names one, and the plans
// (plan/schedule.hpp) build its actions.  "gpipe" | "1f1b" | "interleaved" | "zb-h1".
#include <string_view>
#include <vector>

namespace mdtp {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1 };

// An mdtp::Error naming the value for an unknown name.
ScheduleKind parse_schedule(std::string_view name);
const char* schedule_name(ScheduleKind kind);
// Every schedule, in the order above.
const std::vector<ScheduleKind>& all_schedules();

}  // namespace mdtp
