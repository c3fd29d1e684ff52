#include "run/rank_stats.hpp"

#include "comm/bookkeeping_collectives.hpp"
#include "core/error.hpp"

namespace mdtp::run {
namespace {

void all_reduce_in_place(void* data, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm, WaitPolicy policy) {
  bookkeeping_all_reduce(data, count, type, op, comm, policy, WaitLabel{"rank statistics", "all_reduce", count, nullptr});
}

void broadcast(void* data, int count, MPI_Datatype type, int root, MPI_Comm comm, WaitPolicy policy) {
  bookkeeping_broadcast(data, count, type, root, comm, policy, WaitLabel{"rank statistics", "broadcast", count, nullptr});
}

}  // namespace

std::vector<MeanMax> mean_max_over_ranks(const std::vector<double>& values, MPI_Comm comm, WaitPolicy policy) {
  int size = 1;
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  std::vector<double> sums = values, maxima = values;
  const int n = static_cast<int>(values.size());
  if (n > 0) {
    all_reduce_in_place(sums.data(), n, MPI_DOUBLE, MPI_SUM, comm, policy);
    all_reduce_in_place(maxima.data(), n, MPI_DOUBLE, MPI_MAX, comm, policy);
  }
  std::vector<MeanMax> out(values.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = {sums[i] / size, maxima[i]};
  return out;
}

MeanMax mean_max_over_ranks(double value, MPI_Comm comm, WaitPolicy policy) {
  return mean_max_over_ranks(std::vector<double>{value}, comm, policy)[0];
}

bool all_ranks_agree(bool ok, MPI_Comm comm, WaitPolicy policy) {
  int value = ok ? 1 : 0;
  all_reduce_in_place(&value, 1, MPI_INT, MPI_MIN, comm, policy);
  return value == 1;
}

void throw_first_failure(const std::string& failure, MPI_Comm comm, WaitPolicy policy) {
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  int first = failure.empty() ? size : rank;
  all_reduce_in_place(&first, 1, MPI_INT, MPI_MIN, comm, policy);
  if (first == size) return;
  throw Error(broadcast_string(failure, first, comm, policy));
}

std::string broadcast_string(const std::string& value, int root, MPI_Comm comm, WaitPolicy policy) {
  long long length = static_cast<long long>(value.size());
  broadcast(&length, 1, MPI_LONG_LONG, root, comm, policy);
  std::string out = value;
  out.resize(static_cast<std::size_t>(length));
  if (length > 0) broadcast(out.data(), static_cast<int>(length), MPI_CHAR, root, comm, policy);
  return out;
}

}  // namespace mdtp::run
