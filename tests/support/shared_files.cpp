#include "support/shared_files.hpp"

#include <mpi.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "run/root_task.hpp"

namespace mdtp::testing {

SharedTempDir::SharedTempDir(const std::string& prefix) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  owner_ = rank == 0;
  long long pid = ::getpid();
  MPI_Bcast(&pid, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  auto path = std::filesystem::temp_directory_path() / (prefix + std::to_string(pid));
  run::run_on_root(MPI_COMM_WORLD, [&] { std::filesystem::create_directories(path); });
  path_ = path.string();
}

SharedTempDir::~SharedTempDir() {
  std::error_code ignored;
  if (owner_) std::filesystem::remove_all(path_, ignored);
}

const std::string& shared_dir() {
  // program_invocation_short_name: glibc's name of the running program (test_train_zero, ...).
  static const SharedTempDir dir(std::string("mdtp-") + program_invocation_short_name + "-");
  return dir.path();
}

std::string shared_path(const std::string& name) { return shared_dir() + "/" + name; }

}  // namespace mdtp::testing
