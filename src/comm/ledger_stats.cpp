#include "comm/ledger_stats.hpp"

#include <set>
#include <string>

#include "comm/bookkeeping_collectives.hpp"
#include "core/error.hpp"

namespace mdtp {
namespace {

// Keys travel as "phase\0group\0<op byte>" records, concatenated.
std::vector<char> encode_keys(const std::map<LedgerKey, LedgerTotals>& totals) {
  std::vector<char> bytes;
  for (const auto& [key, value] : totals) {
    bytes.insert(bytes.end(), key.phase.begin(), key.phase.end());
    bytes.push_back('\0');
    bytes.insert(bytes.end(), key.group.begin(), key.group.end());
    bytes.push_back('\0');
    bytes.push_back(static_cast<char>(key.op));
  }
  return bytes;
}

void decode_keys(const char* begin, const char* end, std::set<LedgerKey>& keys) {
  while (begin < end) {
    std::string phase(begin);
    begin += phase.size() + 1;
    std::string group(begin);
    begin += group.size() + 1;
    require(begin < end, "corrupt ledger key record after phase '", phase, "', group '", group, "'");
    auto op = static_cast<CollectiveOp>(static_cast<unsigned char>(*begin++));
    keys.insert(LedgerKey{std::move(phase), std::move(group), op});
  }
}

void all_reduce_doubles(std::vector<double>& values, MPI_Op op, MPI_Comm comm, WaitPolicy policy) {
  bookkeeping_all_reduce(values.data(), static_cast<int>(values.size()), MPI_DOUBLE, op, comm, policy,
                         WaitLabel{"ledger statistics", "all_reduce", static_cast<std::int64_t>(values.size()), nullptr});
}

// Every rank's keys, so that all ranks reduce the same rows in the same order.
std::set<LedgerKey> union_of_keys(const std::map<LedgerKey, LedgerTotals>& totals, MPI_Comm comm,
                                  int size, WaitPolicy policy) {
  std::vector<char> mine = encode_keys(totals);
  int my_length = static_cast<int>(mine.size());
  std::vector<int> lengths(static_cast<std::size_t>(size));
  bookkeeping_all_gather(&my_length, 1, MPI_INT, lengths.data(), comm, policy,
                         WaitLabel{"ledger statistics", "all_gather", size, nullptr});

  std::vector<int> offsets(static_cast<std::size_t>(size), 0);
  for (std::size_t r = 1; r < offsets.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
  std::vector<char> all(static_cast<std::size_t>(offsets.back() + lengths.back()) + 1);
  bookkeeping_all_gatherv(mine.data(), my_length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), comm, policy,
                          WaitLabel{"ledger statistics", "all_gatherv", static_cast<std::int64_t>(all.size()), nullptr});

  std::set<LedgerKey> keys;
  for (std::size_t r = 0; r < offsets.size(); ++r)
    decode_keys(all.data() + offsets[r], all.data() + offsets[r] + lengths[r], keys);
  return keys;
}

}  // namespace

std::vector<LedgerStat> reduce_ledger_stats(const CommLedger& ledger, MPI_Comm comm, WaitPolicy policy) {
  int size = 0;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  const auto totals = ledger.summary();
  const std::set<LedgerKey> keys = union_of_keys(totals, comm, size, policy);

  // Per key: calls, logical bytes, bus bytes, seconds, present (1/0), group size, wait seconds,
  // synchronised calls.
  constexpr std::size_t fields = 8;
  std::vector<double> sums(keys.size() * fields, 0.0);
  std::size_t row = 0;
  for (const auto& key : keys) {
    auto found = totals.find(key);
    if (found != totals.end()) {
      const LedgerTotals& t = found->second;
      double* v = &sums[row * fields];
      v[0] = static_cast<double>(t.calls);
      v[1] = static_cast<double>(t.logical_bytes);
      v[2] = t.bus_bytes;
      v[3] = t.seconds;
      v[4] = 1.0;
      v[5] = t.group_size;
      v[6] = t.wait_seconds;
      v[7] = static_cast<double>(t.synchronised_calls);
    }
    ++row;
  }
  // Absent keys are zeros on both sides: every value here is non-negative.
  std::vector<double> maxima = sums;
  all_reduce_doubles(sums, MPI_SUM, comm, policy);
  all_reduce_doubles(maxima, MPI_MAX, comm, policy);

  std::vector<LedgerStat> stats;
  stats.reserve(keys.size());
  row = 0;
  for (const auto& key : keys) {
    const double* s = &sums[row * fields];
    const double* m = &maxima[row * fields];
    LedgerStat stat;
    stat.key = key;
    stat.calls = {s[0] / size, m[0]};
    stat.logical_bytes = {s[1] / size, m[1]};
    stat.bus_bytes = {s[2] / size, m[2]};
    stat.seconds = {s[3] / size, m[3]};
    stat.ranks = static_cast<int>(s[4]);
    stat.group_size = static_cast<int>(m[5]);
    stat.wait_seconds = {s[6] / size, m[6]};
    stat.synchronised_calls = {s[7] / size, m[7]};
    stats.push_back(std::move(stat));
    ++row;
  }
  return stats;
}

}  // namespace mdtp
