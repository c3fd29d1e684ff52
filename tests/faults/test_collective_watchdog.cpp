// The collective deadline (comm/collective_watchdog.hpp) without killing the job: the setting's
// parser, the line a user sees, and the watchdog thread that guards waits blocked in MPI_Wait,
// here with a handler that records the line instead of aborting.  (The abort itself, with a rank
// that really stops answering, is tests/faults/test_watchdog.py.)
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/collective_watchdog.hpp"
#include "comm/ledger.hpp"
#include "core/error.hpp"

using Catch::Matchers::Contains;

namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<std::string> lines;
  mdtp::CollectiveWatchdog::Expired handler() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

}  // namespace

TEST_CASE("the collective timeout setting is a number of seconds >= 0", "[faults]") {
  CHECK(mdtp::parse_collective_timeout("3") == 3.0);
  CHECK(mdtp::parse_collective_timeout("0.5") == 0.5);
  CHECK(mdtp::parse_collective_timeout("0") == 0.0);
  for (const char* bad : {"", "-1", "abc", "3s", "inf", "nan"}) {
    INFO(bad);
    CHECK_THROWS_WITH(mdtp::parse_collective_timeout(bad),
                      Contains(std::string("collective timeout '") + bad + "' is not a number of seconds >= 0"));
  }
}

TEST_CASE("the deadline line names rank, group, op, elements, phase and step", "[faults]") {
  mdtp::CommLedger ledger;
  ledger.set_phase("backward");
  ledger.set_step(12);
  const std::string line =
      mdtp::deadline_message(5, mdtp::WaitLabel{"tp.row", "all_reduce", 4096, &ledger}, 3.0);
  CHECK(line ==
        "mdtp: rank 5: collective timeout: all_reduce on group 'tp.row' of 4096 elements in phase 'backward' at "
        "step 12 did not complete within 3 s (MDTP_COLLECTIVE_TIMEOUT / --collective-timeout); a rank stopped "
        "answering, aborting the job");
  CHECK(line.find('\n') == std::string::npos);

  mdtp::CommLedger idle;  // no phase, no step
  CHECK_THAT(mdtp::deadline_message(0, mdtp::WaitLabel{"world", "barrier", -1, &idle}, 300),
             Contains("barrier on group 'world' in phase 'none' did not complete within 300 s"));
  CHECK_THAT(mdtp::deadline_message(1, mdtp::WaitLabel{"world", "broadcast", 8, nullptr}, 1),
             Contains("broadcast on group 'world' of 8 elements did not complete"));
}

TEST_CASE("the watchdog reports a wait armed past its deadline, once", "[faults]") {
  Recorder recorder;
  mdtp::CommLedger ledger;
  ledger.set_phase("optimizer");
  ledger.set_step(3);
  const mdtp::WaitLabel label{"dp", "reduce_scatter", 100, &ledger};
  const auto start = std::chrono::steady_clock::now();
  {
    mdtp::CollectiveWatchdog dog(0.2, 4, recorder.handler());
    mdtp::CollectiveWatchdog::Armed armed(dog, label);
    std::this_thread::sleep_for(std::chrono::milliseconds(900));
  }
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const auto lines = recorder.seen();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == mdtp::deadline_message(4, label, 0.2));
  CHECK_THAT(lines[0], Contains("rank 4") && Contains("phase 'optimizer' at step 3"));
  CHECK(waited < 5.0);  // the destructor stops the watchdog's thread promptly
}

TEST_CASE("waits that finish in time, and a timeout of 0, report nothing", "[faults]") {
  Recorder recorder;
  const mdtp::WaitLabel label{"world", "all_reduce", 1, nullptr};
  {
    mdtp::CollectiveWatchdog dog(2.0, 0, recorder.handler());
    for (int i = 0; i < 5; ++i) {
      mdtp::CollectiveWatchdog::Armed armed(dog, label);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    // Two waits armed at once (a second thread's), both short.
    mdtp::CollectiveWatchdog::Armed a(dog, label);
    mdtp::CollectiveWatchdog::Armed b(dog, label);
  }
  {
    mdtp::CollectiveWatchdog off(0.0, 0, recorder.handler());
    CHECK_FALSE(off.enabled());
    mdtp::CollectiveWatchdog::Armed armed(off, label);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  CHECK(recorder.seen().empty());
  CHECK_THROWS_WITH(mdtp::CollectiveWatchdog(-1.0, 0, recorder.handler()), Contains("timeout >= 0; got -1"));
}
