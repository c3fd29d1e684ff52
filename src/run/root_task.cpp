#include "run/root_task.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace mdtp::run {

void run_on_root(MPI_Comm comm, const std::function<void()>& task) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::string message;
  int failed = 0;
  if (rank == 0) {
    try {
      task();
    } catch (const std::exception& e) {
      failed = 1;
      message = e.what();
    }
  }
  MPI_Bcast(&failed, 1, MPI_INT, 0, comm);
  if (!failed) return;
  int length = static_cast<int>(message.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, comm);
  std::vector<char> text(static_cast<std::size_t>(length) + 1, '\0');
  if (rank == 0) message.copy(text.data(), message.size());
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, comm);
  throw Error(std::string(text.data(), static_cast<std::size_t>(length)));
}

}  // namespace mdtp::run
