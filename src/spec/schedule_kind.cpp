#include "spec/schedule_kind.hpp"

#include <string>

#include "core/error.hpp"

namespace mdtp {

ScheduleKind parse_schedule(std::string_view name) {
  for (ScheduleKind k : all_schedules())
    if (name == schedule_name(k)) return k;
  throw_error("unknown pipeline schedule '", std::string(name), "'; expected one of gpipe, 1f1b, interleaved, zb-h1");
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
  }
  return "?";
}

const std::vector<ScheduleKind>& all_schedules() {
  static const std::vector<ScheduleKind> kinds{ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                               ScheduleKind::interleaved, ScheduleKind::zb_h1};
  return kinds;
}

}  // namespace mdtp
