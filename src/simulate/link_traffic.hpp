#pragma once
// Which links of a simulated cluster were shared (docs/simulate.md, "Which link was shared").
//
// Why: where a simulated step parts from the analytic model, one cause can be two transfers on one
// link at once — the model prices each collective on its own links, the simulator shares a link's
// bandwidth among every flow on it (max-min, CM02).  This counts, per link and direction, the
// transfers the simulated network starts on it and the bytes of those that overlapped a transfer
// between another pair of GPUs there ("shared") and of those whose overlap asked more than the
// link's bandwidth ("contended": they slowed each other; a rail's uplink, sized for all its NICs,
// carries two NIC flows shared but not contended).  Transfers of one pair of GPUs never share or
// contend with each other: they cross the same links, so together they ask no more than one of
// them, and side by side they take as long as one after the other.
//
// How it sees the transfers: SimGrid asks the network model for a bandwidth factor as each
// transfer starts, with its size, its two hosts and its route (the public NetworkModelIntf
// callback); the callback records the transfer against every link of its route and returns 1, the
// factor CM02 applies anyway, so the simulated times do not change (tested).  SimGrid calls it in
// simulated-time order for every rank of the process, so one counter sees the whole cluster.
//
// When two transfers overlap: SimGrid 3.32 reports a transfer's end without its route, so each is
// given its uncontended interval — from its start plus the route's latency, for bytes / the
// route's narrowest bandwidth, at that bandwidth (its pair's demand).  A transfer's shared bytes on
// a link are those its interval moves while a transfer of another pair is on the link; its
// contended bytes those it moves while the pairs on the link ask more than its bandwidth (a
// 32-byte message crossing a 1 MiB transfer makes a few bytes of it contended, not all of it).
// Real overlaps last longer than uncontended intervals (contention stretches them), so the counts
// are lower bounds.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/table.hpp"

namespace mdtp::simulate {

// One link of a transfer's route.
struct RouteLink {
  const void* key = nullptr;          // identifies the link (its SimGrid object)
  const std::string* name = nullptr;  // e.g. "n0-nic3_UP": link id and direction
  double bandwidth = 0.0;             // bytes/s
  double latency = 0.0;               // s
};

// One link's totals.
struct LinkTrafficRow {
  std::string link;
  std::int64_t flows = 0;  // transfers that crossed it
  double bytes = 0.0;
  std::int64_t shared_flows = 0;  // of those, the ones that overlapped another pair's there
  double shared_bytes = 0.0;       // the bytes they moved meanwhile
  std::int64_t contended_flows = 0;  // the ones that met it asked more than its bandwidth
  double contended_bytes = 0.0;      // the bytes they moved meanwhile
  double peak_demand = 0.0;  // the most the overlapping transfers asked of it, in its bandwidths
};

class LinkTraffic {
 public:
  // Counts every transfer the simulated network starts from now on, while counting is on (the SMPI
  // build: installs the callback above, once per simulation — rank 0 calls it; mdtp::Error
  // elsewhere, and where a bandwidth factor is already configured: SimGrid takes one of the two).
  static std::shared_ptr<LinkTraffic> start_counting_simulated_network();

  // Transfers are counted only while counting is on (from the start: a simulated run turns it on
  // for its steps alone, the collectives for their timed calls).
  void set_counting(bool on) { counting_ = on; }
  bool counting() const { return counting_; }

  // One transfer of `bytes` from `source` to `destination` (the hosts: any keys that name them)
  // starting at simulated time `now` over `route` (what the callback records; tests call it
  // directly).  Transfers come in order of `now`.
  void record(double now, double bytes, const void* source, const void* destination,
              const std::vector<RouteLink>& route);

  // Over every link: the bytes the links carried (a transfer counts once per link of its route),
  // those moved shared and contended; running sums, so the traffic of a stretch is a difference.
  struct Bytes {
    double carried = 0.0, shared = 0.0, contended = 0.0;
    Bytes operator-(const Bytes& before) const {
      return {carried - before.carried, shared - before.shared, contended - before.contended};
    }
  };
  const Bytes& bytes() const { return bytes_; }

  // Every link that carried a transfer: most contended bytes first, then most shared, then most
  // bytes, then by name.
  std::vector<LinkTrafficRow> rows() const;
  // rows() as the results file's `links` table (columns as LinkTrafficRow's members).
  Table table() const;
  // One line: how many links carried traffic, the share of their bytes shared and contended, and
  // the `top` most contended links with their share — the most shared where none was contended;
  // a link is named from 1 % of its bytes on.
  std::string summary(std::size_t top) const;

 private:
  // Disjoint stretches of simulated time, merged as they are added.
  class Stretches {
   public:
    // Adds [begin, end); returns the length not covered before.
    double add(double begin, double end);
    bool empty() const { return spans_.empty(); }

   private:
    std::vector<std::pair<double, double>> spans_;  // sorted, disjoint
  };
  // A transfer on one link, while its uncontended interval may still overlap a later one.
  struct InFlight {
    double start = 0.0, end = 0.0, demand = 0.0, bytes = 0.0;
    std::pair<const void*, const void*> pair;  // its source and destination
    Stretches shared, contended;                // the parts of [start, end) spent so
  };
  struct Link {
    LinkTrafficRow totals;
    double bandwidth = 0.0;
    std::vector<InFlight> in_flight;
  };
  // Adds [begin, end) of `flow` to the stretches it `spent` so (shared or contended), counting the
  // transfer in `flows` the first time and the bytes it moves there that were not counted before in
  // `bytes`; returns those bytes.
  static double credit(Stretches& spent, std::int64_t& flows, double& bytes, const InFlight& flow, double begin,
                       double end);
  // Counts [begin, end) of `flow` on `link` as shared (or contended), once however often it is met.
  void credit_shared(Link& link, InFlight& flow, double begin, double end);
  void credit_contended(Link& link, InFlight& flow, double begin, double end);

  std::unordered_map<const void*, Link> links_;
  std::int64_t transfers_ = 0;
  Bytes bytes_;
  bool counting_ = true;
};

}  // namespace mdtp::simulate
