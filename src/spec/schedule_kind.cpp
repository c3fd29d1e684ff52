#include "spec/schedule_kind.hpp"

#include <string>

#include "core/error.hpp"

namespace mdtp {

ScheduleKind parse_schedule(std::string_view name) {
  for (ScheduleKind k : all_schedules())
    if (name == schedule_name(k)) return k;
  throw_error("unknown pipeline schedule '", std::string(name), "'; expected one of ", schedule_list());
}

const char* schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
    case ScheduleKind::zb_h2: return "zb-h2";
    case ScheduleKind::zb_v: return "zb-v";
    case ScheduleKind::dualpipev: return "dualpipev";
    case ScheduleKind::dualpipe: return "dualpipe";
  }
  return "?";
}

const std::vector<ScheduleKind>& all_schedules() {
  static const std::vector<ScheduleKind> kinds{ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                               ScheduleKind::interleaved, ScheduleKind::zb_h1,
                                               ScheduleKind::zb_h2, ScheduleKind::zb_v,
                                               ScheduleKind::dualpipev, ScheduleKind::dualpipe};
  return kinds;
}

const char* schedule_list() { return "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v, dualpipev, dualpipe"; }

bool is_v_shaped(ScheduleKind kind) { return kind == ScheduleKind::zb_v || kind == ScheduleKind::dualpipev; }

bool is_mirrored(ScheduleKind kind) { return kind == ScheduleKind::dualpipe; }

int fixed_chunks(ScheduleKind kind) {
  if (kind == ScheduleKind::interleaved) return 0;
  return is_v_shaped(kind) || is_mirrored(kind) ? 2 : 1;
}

}  // namespace mdtp
