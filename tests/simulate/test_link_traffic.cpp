// The counter of the simulated links' traffic (simulate/link_traffic.hpp), fed the transfers a
// simulator would report (start, bytes, hosts, route): each transfer's uncontended interval from
// the route's latency and narrowest bandwidth; the bytes two pairs' transfers move while they
// overlap on a link counted as shared there, both sides; contended while the pairs' demands exceed
// the link's bandwidth, stretch by stretch; nothing for transfers one after the other, nor between
// the transfers of one pair; the order of the table, its running sums and its one-line summary; a
// window that leaves set-up out; outside the SMPI build, a one-line refusal.
#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "core/error.hpp"
#include "simulate/link_traffic.hpp"

using namespace mdtp;
using simulate::LinkTraffic;
using simulate::RouteLink;

namespace {

// A small rail-optimised fabric: GPU NVLink links 400 GB/s, NICs 50 GB/s, a rail uplink sized for
// two NICs; half the route latency on each end link, none on the uplink.
constexpr double kNvlink = 400e9, kNic = 50e9, kUplink = 2 * kNic, kHalfAlpha = 1e-6;
const std::string nic0_up = "n0-nic0_UP", nic1_up = "n1-nic0_UP", uplink_up = "rail0-uplink_UP",
                  nic2_down = "n2-nic0_DOWN", nvlink_up = "n0-gpu0-nvlink_UP", nvlink_down = "n0-gpu1-nvlink_DOWN";
const int keys[6] = {};  // stand-ins for the links' SimGrid objects
const int gpus[8] = {};  // and for the hosts: gpus[i] is GPU 0 of node i, gpus[4 + i] its GPU 1
const RouteLink kNic0Up{&keys[0], &nic0_up, kNic, kHalfAlpha}, kNic1Up{&keys[1], &nic1_up, kNic, kHalfAlpha},
    kUplinkUp{&keys[2], &uplink_up, kUplink, 0.0}, kNic2Down{&keys[3], &nic2_down, kNic, kHalfAlpha},
    kNvlinkUp{&keys[4], &nvlink_up, kNvlink, kHalfAlpha}, kNvlinkDown{&keys[5], &nvlink_down, kNvlink, kHalfAlpha};

const simulate::LinkTrafficRow& row(const std::vector<simulate::LinkTrafficRow>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.link == name) return r;
  FAIL("no row for " << name);
  return rows.front();
}

}  // namespace

TEST_CASE("link traffic: transfers one after the other share nothing", "[simulate]") {
  LinkTraffic traffic;
  const double bytes = 50e6;  // 1 ms at one NIC's 50 GB/s, after 2 us of latency; then another GPU's
  traffic.record(0.0, bytes, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp, kNic2Down});
  traffic.record(1.002e-3, bytes, &gpus[1], &gpus[2], {kNic1Up, kUplinkUp, kNic2Down});  // starts as the first ends
  CHECK(traffic.bytes().shared == 0.0);
  CHECK(traffic.bytes().contended == 0.0);
  CHECK(traffic.bytes().carried == 6 * bytes);
  const auto rows = traffic.rows();
  REQUIRE(rows.size() == 4);
  CHECK(row(rows, nic2_down).flows == 2);
  CHECK(row(rows, nic2_down).peak_demand == Approx(1.0));
  CHECK(row(rows, uplink_up).peak_demand == Approx(0.5));
  CHECK(traffic.summary(3).find("2 transfers over 4 link directions; of the bytes they carried 0.0 % moved beside "
                                "another pair's transfer on a link (shared), 0.0 % while the link was asked more "
                                "than its bandwidth (contended); no link shared") != std::string::npos);
}

TEST_CASE("link traffic: overlapping transfers are shared, contended where they ask more than the link",
          "[simulate]") {
  LinkTraffic traffic;
  const double bytes = 50e6;
  // Two GPUs of two nodes send to node 2's GPU 0 over rail 0, half a millisecond apart: on the
  // uplink (two NICs' bandwidth) they are shared, not contended; on node 2's NIC they contend,
  // asking twice its bandwidth.
  traffic.record(0.0, bytes, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp, kNic2Down});
  traffic.record(0.5e-3, bytes, &gpus[1], &gpus[2], {kNic1Up, kUplinkUp, kNic2Down});
  // A small NVLink transfer meanwhile, on links nobody else uses.
  traffic.record(0.6e-3, 1e6, &gpus[0], &gpus[4], {kNvlinkUp, kNvlinkDown});
  // A [2 us, 1.002 ms) and B [0.502, 1.502 ms) overlap for 0.5 ms: 25 MB of each.
  const auto rows = traffic.rows();
  REQUIRE(rows.size() == 6);
  CHECK(rows[0].link == nic2_down);  // most contended first
  CHECK(rows[0].shared_flows == 2);
  CHECK(rows[0].contended_flows == 2);  // both of the pair
  CHECK(rows[0].contended_bytes == Approx(bytes));
  CHECK(rows[0].peak_demand == Approx(2.0));
  CHECK(rows[1].link == uplink_up);  // then most shared
  CHECK(rows[1].shared_bytes == Approx(bytes));
  CHECK(rows[1].contended_flows == 0);
  CHECK(rows[1].peak_demand == Approx(1.0));
  CHECK(row(rows, nic0_up).shared_flows == 0);
  CHECK(row(rows, nvlink_up).shared_flows == 0);
  // A transfer's demand is its narrowest link's bandwidth: the NVLink transfer asks 1/1 of its link.
  CHECK(row(rows, nvlink_up).peak_demand == Approx(1.0));
  CHECK(traffic.bytes().carried == 6 * bytes + 2e6);
  CHECK(traffic.bytes().shared == Approx(2 * bytes));
  CHECK(traffic.bytes().contended == Approx(bytes));

  const Table t = traffic.table();
  CHECK(t.rows() == 6);
  CHECK(std::get<std::vector<std::string>>(t.column("link")).front() == nic2_down);
  CHECK(std::get<std::vector<double>>(t.column("contended_bytes")).front() == Approx(bytes));
  CHECK(std::get<std::vector<std::int64_t>>(t.column("shared_flows"))[1] == 2);

  const std::string line = traffic.summary(3);
  CHECK(line.find("3 transfers over 6 link directions") != std::string::npos);
  CHECK(line.find("most contended: n2-nic0_DOWN 50000000 of 100000000 B (50 %, 2 of 2 transfers; up to 2.00x its "
                  "bandwidth asked)") != std::string::npos);
  CHECK(line.find("rail0-uplink") == std::string::npos);  // shared, not contended: not named
}

TEST_CASE("link traffic: a small message crossing a large transfer contends for its own length", "[simulate]") {
  LinkTraffic traffic;
  traffic.record(0.0, 50e6, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp, kNic2Down});  // 1 ms
  traffic.record(0.5e-3, 32, &gpus[1], &gpus[2], {kNic1Up, kUplinkUp, kNic2Down});  // 0.64 ns
  const auto rows = traffic.rows();
  CHECK(row(rows, nic2_down).contended_flows == 2);
  // 32 bytes of the message and as many of the large transfer, not its 50 MB.
  CHECK(row(rows, nic2_down).contended_bytes == Approx(64.0));
  // Under 1 % of its bytes: not named; the message itself is 100 % contended but carried 32 bytes
  // of the link's 50 MB — the link is what the summary names, so nothing is.
  CHECK(traffic.summary(3).find("no link shared") != std::string::npos);
}

TEST_CASE("link traffic: transfers outside the counted window are left out", "[simulate]") {
  LinkTraffic traffic;
  traffic.set_counting(false);
  traffic.record(0.0, 50e6, &gpus[0], &gpus[1], {kNic0Up});  // set-up: not counted, and no overlap with what follows
  traffic.set_counting(true);
  const LinkTraffic::Bytes before = traffic.bytes();
  traffic.record(1e-4, 10, &gpus[3], &gpus[1], {kNic0Up});
  CHECK((traffic.bytes() - before).carried == 10.0);  // the stretch's traffic, as collectives reads it
  traffic.set_counting(false);
  CHECK_FALSE(traffic.counting());
  traffic.record(2e-4, 50e6, &gpus[0], &gpus[2], {kNic0Up});  // reports after the steps: not counted
  const auto rows = traffic.rows();
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].flows == 1);
  CHECK(rows[0].bytes == 10.0);
  CHECK(rows[0].shared_flows == 0);
}

#ifndef MDTP_SMPI
TEST_CASE("link traffic: outside the SMPI build, counting refuses in one line", "[simulate]") {
  CHECK_THROWS_WITH(LinkTraffic::start_counting_simulated_network(),
                    Catch::Contains("not the SMPI build (configure with -DMDTP_SMPI=ON)"));
}
#endif

TEST_CASE("link traffic: demand is counted stretch by stretch, not summed over the interval", "[simulate]") {
  // On the uplink (two NICs' bandwidth): A and A' one after the other, B across both. At no instant
  // do more than two NIC flows ask for the uplink: shared, not contended.  A third concurrent one
  // (C, over B and A') asks three NICs' worth there: C, B and A' contend; A, before C, does not.
  LinkTraffic traffic;
  const double bytes = 50e6;  // 1 ms at one NIC
  traffic.record(0.0, bytes, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp});     // A: [2 us, 1.002 ms)
  traffic.record(0.5e-3, bytes, &gpus[1], &gpus[2], {kNic1Up, kUplinkUp});  // B: [0.502, 1.502 ms)
  traffic.record(1.002e-3, bytes, &gpus[0], &gpus[3], {kNic0Up, kUplinkUp});  // A': [1.004, 2.004 ms)
  auto rows = traffic.rows();
  CHECK(row(rows, uplink_up).shared_flows == 3);
  CHECK(row(rows, uplink_up).shared_bytes == Approx(50e9 * 2 * (0.5e-3 + 0.498e-3)));  // A-B, B-A', both sides
  CHECK(row(rows, uplink_up).contended_flows == 0);
  CHECK(row(rows, uplink_up).peak_demand == Approx(1.0));
  // Nothing contended: the summary names the most shared links.
  CHECK(traffic.summary(1).find("no link contended; most shared: rail0-uplink_UP 99800000 of 150000000 B (67 %, 3 "
                                "of 3 transfers; up to 1.00x its bandwidth asked)") != std::string::npos);
  const int other = 0;
  const std::string nic3_name = "n3-nic0_UP";
  const RouteLink nic3_up{&other, &nic3_name, kNic, kHalfAlpha};  // another node's NIC
  traffic.record(1.2e-3, bytes, &gpus[3], &gpus[2], {nic3_up, kUplinkUp});  // C: [1.202, 2.202 ms)
  // Over [1.202, 1.502 ms) B, A' and C ask three NICs' worth: 0.3 ms of each contends.
  rows = traffic.rows();
  CHECK(row(rows, uplink_up).contended_flows == 3);
  CHECK(row(rows, uplink_up).contended_bytes == Approx(3 * 50e9 * 0.3e-3));
  CHECK(row(rows, uplink_up).peak_demand == Approx(1.5));
}

TEST_CASE("link traffic: transfers of one pair of GPUs neither share nor contend", "[simulate]") {
  // A ring's sender posts its next chunk while the last is still on its NIC (its upstream is on
  // NVLink, faster): both go to the same GPU over the same links, one after the other in effect.
  LinkTraffic traffic;
  const double bytes = 50e6;
  traffic.record(0.0, bytes, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp, kNic2Down});
  traffic.record(0.1e-3, bytes, &gpus[0], &gpus[2], {kNic0Up, kUplinkUp, kNic2Down});
  CHECK(traffic.bytes().shared == 0.0);
  CHECK(traffic.bytes().contended == 0.0);
  // A third pair on node 2's NIC meets both and asks for it beside them once: 2x, contended with both.
  traffic.record(0.2e-3, bytes, &gpus[1], &gpus[2], {kNic1Up, kUplinkUp, kNic2Down});
  // It [0.202, 1.202 ms) overlaps A [0.002, 1.002) for 0.8 ms and A2 [0.102, 1.102) for 0.9 ms.
  const auto rows = traffic.rows();
  CHECK(row(rows, nic2_down).shared_flows == 3);
  CHECK(row(rows, nic2_down).shared_bytes == Approx(50e9 * (0.8e-3 + 0.9e-3 + 0.9e-3)));
  CHECK(row(rows, nic2_down).contended_flows == 3);
  CHECK(row(rows, nic2_down).contended_bytes == Approx(50e9 * (0.8e-3 + 0.9e-3 + 0.9e-3)));
  CHECK(row(rows, nic2_down).peak_demand == Approx(2.0));
  CHECK(row(rows, uplink_up).contended_flows == 0);  // two NICs' worth fits the uplink
  CHECK(row(rows, nic0_up).shared_flows == 0);
}
