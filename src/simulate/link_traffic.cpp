#include "simulate/link_traffic.hpp"

#ifdef MDTP_SMPI
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <xbt/config.hpp>
#endif

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_set>

#include "core/error.hpp"

namespace mdtp::simulate {
namespace {

// Demands within this fraction of a link's bandwidth fit it (two NIC flows on an uplink of two
// NICs' bandwidth are not contended, whatever the rounding of the platform's figures).
constexpr double kFits = 1e-9;
// The share of a link's bytes, contended or shared, from which the summary names it.
constexpr double kNamed = 0.01;

}  // namespace

std::shared_ptr<LinkTraffic> LinkTraffic::start_counting_simulated_network() {
#ifdef MDTP_SMPI
  // SimGrid aborts on a callback beside a configured factor: refused here in one line instead.
  require(simgrid::config::is_default("network/bandwidth-factor"),
          "link traffic: --cfg=network/bandwidth-factor is set, and SimGrid takes either it or the callback that "
          "counts the links' traffic; leave it unset (CM02 applies 1)");
  auto* model = simgrid::s4u::Engine::get_instance()->get_netzone_root()->get_network_model();
  require(model != nullptr, "link traffic: the simulated platform has no network model");
  auto traffic = std::make_shared<LinkTraffic>();
  // The callback shares the counter with the caller: it lives as long as the simulation.  It runs
  // for every message of every rank, so it does nothing outside the counted stretches and reuses
  // one route buffer.
  model->set_bw_factor_cb([traffic, route = std::vector<RouteLink>()](
                              double size, const simgrid::s4u::Host* source, const simgrid::s4u::Host* destination,
                              const std::vector<simgrid::s4u::Link*>& links,
                              const std::unordered_set<simgrid::s4u::NetZone*>&) mutable {
    if (!traffic->counting()) return 1.0;
    route.clear();
    for (const simgrid::s4u::Link* link : links)
      route.push_back({link, &link->get_name(), link->get_bandwidth(), link->get_latency()});
    traffic->record(simgrid::s4u::Engine::get_clock(), size, source, destination, route);
    return 1.0;  // CM02's own factor: the simulated times are those of a run without the counter
  });
  return traffic;
#else
  throw_error("link traffic: this mdtp is not the SMPI build (configure with -DMDTP_SMPI=ON)");
#endif
}

double LinkTraffic::Stretches::add(double begin, double end) {
  if (!(end > begin)) return 0.0;
  double covered = 0.0;  // of [begin, end), by the spans it merges with
  auto it = std::lower_bound(spans_.begin(), spans_.end(), begin,
                             [](const std::pair<double, double>& span, double t) { return span.second < t; });
  double merged_begin = begin, merged_end = end;
  auto first = it;
  for (; it != spans_.end() && it->first <= end; ++it) {
    covered += std::max(0.0, std::min(end, it->second) - std::max(begin, it->first));
    merged_begin = std::min(merged_begin, it->first);
    merged_end = std::max(merged_end, it->second);
  }
  it = spans_.erase(first, it);
  spans_.insert(it, {merged_begin, merged_end});
  return (end - begin) - covered;
}

double LinkTraffic::credit(Stretches& spent, std::int64_t& flows, double& bytes, const InFlight& flow, double begin,
                           double end) {
  const bool first = spent.empty();
  const double fresh = flow.demand * spent.add(begin, end);
  if (fresh <= 0) return 0.0;
  if (first) ++flows;
  bytes += fresh;
  return fresh;
}

void LinkTraffic::credit_shared(Link& link, InFlight& flow, double begin, double end) {
  bytes_.shared += credit(flow.shared, link.totals.shared_flows, link.totals.shared_bytes, flow, begin, end);
}

void LinkTraffic::credit_contended(Link& link, InFlight& flow, double begin, double end) {
  bytes_.contended += credit(flow.contended, link.totals.contended_flows, link.totals.contended_bytes, flow, begin, end);
}

void LinkTraffic::record(double now, double bytes, const void* source, const void* destination,
                         const std::vector<RouteLink>& route) {
  if (!counting_ || route.empty()) return;
  ++transfers_;
  // The transfer alone: after the route's latency, at its narrowest link's bandwidth.
  double latency = 0.0, rate = std::numeric_limits<double>::infinity();
  for (const RouteLink& at : route) {
    latency += at.latency;
    if (at.bandwidth > 0) rate = std::min(rate, at.bandwidth);
  }
  InFlight flow;
  flow.start = now + latency;
  flow.demand = std::isfinite(rate) ? rate : 0.0;
  flow.end = flow.start + (flow.demand > 0 ? bytes / flow.demand : 0.0);
  flow.bytes = bytes;
  flow.pair = {source, destination};
  for (const RouteLink& at : route) {
    Link& link = links_[at.key];
    if (link.totals.flows == 0) {
      if (at.name != nullptr) link.totals.link = *at.name;
      link.bandwidth = at.bandwidth;
    }
    ++link.totals.flows;
    link.totals.bytes += bytes;
    bytes_.carried += bytes;
    // Transfers that ended before this one sends can no longer overlap any (they come in order).
    std::erase_if(link.in_flight, [&](const InFlight& f) { return f.end <= flow.start; });
    InFlight here = flow;
    // The demand on the link over this transfer's interval, stretch by stretch (those it overlaps
    // need not overlap each other), a pair's transfers asking its demand once: where it exceeds the
    // bandwidth, every transfer there contends.
    struct Change {
      double time;
      int step;  // +1 a transfer starts, -1 one ends
      const InFlight* flow;
    };
    std::vector<Change> changes;
    for (const InFlight& f : link.in_flight)
      if (f.start < here.end && f.pair != here.pair) {
        changes.push_back({std::max(f.start, here.start), +1, &f});
        changes.push_back({std::min(f.end, here.end), -1, &f});
      }
    // At one instant, ends before starts.
    std::sort(changes.begin(), changes.end(),
              [](const Change& a, const Change& b) { return a.time != b.time ? a.time < b.time : a.step < b.step; });
    const double capacity = link.bandwidth * (1 + kFits);
    std::map<std::pair<const void*, const void*>, int> on_link;  // transfers per pair, as the sweep goes
    std::vector<std::pair<double, double>> over;                // stretches asking more than the bandwidth
    double demand = here.demand, peak = demand, from = here.start;
    for (const Change& c : changes) {
      if (c.time > from && demand > capacity) over.emplace_back(from, c.time);
      int& count = on_link[c.flow->pair];
      if (c.step > 0 && count++ == 0) demand += c.flow->demand;
      if (c.step < 0 && --count == 0) demand -= c.flow->demand;
      peak = std::max(peak, demand);
      from = c.time;
    }
    if (here.end > from && demand > capacity) over.emplace_back(from, here.end);
    if (link.bandwidth > 0) link.totals.peak_demand = std::max(link.totals.peak_demand, peak / link.bandwidth);
    for (InFlight& f : link.in_flight) {
      if (f.start >= here.end || f.pair == here.pair) continue;
      const double begin = std::max(f.start, here.start), end = std::min(f.end, here.end);
      credit_shared(link, f, begin, end);
      credit_shared(link, here, begin, end);
      for (const auto& [over_begin, over_end] : over) credit_contended(link, f, std::max(begin, over_begin), std::min(end, over_end));
    }
    for (const auto& [over_begin, over_end] : over) credit_contended(link, here, over_begin, over_end);
    link.in_flight.push_back(here);
  }
}

std::vector<LinkTrafficRow> LinkTraffic::rows() const {
  std::vector<LinkTrafficRow> out;
  out.reserve(links_.size());
  for (const auto& [key, link] : links_) out.push_back(link.totals);
  std::sort(out.begin(), out.end(), [](const LinkTrafficRow& a, const LinkTrafficRow& b) {
    if (a.contended_bytes != b.contended_bytes) return a.contended_bytes > b.contended_bytes;
    if (a.shared_bytes != b.shared_bytes) return a.shared_bytes > b.shared_bytes;
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    return a.link < b.link;
  });
  return out;
}

Table LinkTraffic::table() const {
  Table t;
  t.text("link").integer("flows").real("bytes").integer("shared_flows").real("shared_bytes").integer("contended_flows")
      .real("contended_bytes").real("peak_demand");
  for (const LinkTrafficRow& r : rows())
    t.row()(r.link)(r.flows)(r.bytes)(r.shared_flows)(r.shared_bytes)(r.contended_flows)(r.contended_bytes)(r.peak_demand);
  return t;
}

std::string LinkTraffic::summary(std::size_t top) const {
  std::vector<LinkTrafficRow> all = rows();
  const auto percent = [](double part, double whole) { return whole > 0 ? 100 * part / whole : 0.0; };
  std::string line = fmt::format(
      "simulated links: {} transfers over {} link directions; of the bytes they carried {:.1f} % moved beside "
      "another pair's transfer on a link (shared), {:.1f} % while the link was asked more than its bandwidth "
      "(contended); ",
      transfers_, all.size(), percent(bytes_.shared, bytes_.carried), percent(bytes_.contended, bytes_.carried));
  // A link is named where at least kNamed of its bytes were contended (else shared): a few bytes
  // of bookkeeping crossing a large transfer are not what a reader looks for.
  const auto named = [](double part, const LinkTrafficRow& r) { return part > 0 && part >= kNamed * r.bytes; };
  const bool contended = std::any_of(all.begin(), all.end(), [&](const auto& r) { return named(r.contended_bytes, r); });
  if (!contended) {
    // Nothing contended: name the most shared links instead.
    std::stable_sort(all.begin(), all.end(),
                     [](const LinkTrafficRow& a, const LinkTrafficRow& b) { return a.shared_bytes > b.shared_bytes; });
    if (std::none_of(all.begin(), all.end(), [&](const auto& r) { return named(r.shared_bytes, r); }))
      return line + "no link shared";
    line += "no link contended; most shared:";
  } else {
    line += "most contended:";
  }
  std::size_t shown = 0;
  for (const LinkTrafficRow& r : all) {
    const double part = contended ? r.contended_bytes : r.shared_bytes;
    if (shown == top || part <= 0) break;
    if (!named(part, r)) continue;
    line += fmt::format("{} {} {:.0f} of {:.0f} B ({:.0f} %, {} of {} transfers; up to {:.2f}x its bandwidth asked)",
                        shown++ == 0 ? "" : ";", r.link, part, r.bytes, percent(part, r.bytes),
                        contended ? r.contended_flows : r.shared_flows, r.flows, r.peak_demand);
  }
  return line;
}

}  // namespace mdtp::simulate
