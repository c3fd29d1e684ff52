#pragma once
// Files the ranks of a test share: one directory per test process group, made by rank 0 (its name
// carries the program's name and rank 0's pid, so concurrent ctest entries never meet) and removed
// by rank 0 at exit, after every rank is done with it.
#include <string>

namespace mdtp::testing {

// A directory all ranks share, named `prefix` + rank 0's pid: created by the constructor
// (collective over MPI_COMM_WORLD) and removed by rank 0 when destroyed — after MPI_Finalize for a
// function-local static, when every rank is done with it.
class SharedTempDir {
 public:
  explicit SharedTempDir(const std::string& prefix);
  ~SharedTempDir();
  SharedTempDir(const SharedTempDir&) = delete;
  SharedTempDir& operator=(const SharedTempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool owner_;
};

// This test program's shared directory (collective the first time it is called) and a file in it.
const std::string& shared_dir();
std::string shared_path(const std::string& name);

}  // namespace mdtp::testing
