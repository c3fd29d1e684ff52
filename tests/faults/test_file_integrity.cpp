// Files that prove their integrity (io/h5_file.hpp, io/results_file.hpp): every dataset H5File
// writes carries a CRC-32 checked on read, so a flipped byte is named (file, dataset); files
// without one (older files, other tools) still load; and a write that fails or is killed
// half-way leaves the earlier file byte for byte as it was — checkpoints (write_atomically) and
// results files (append_run) alike.
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/h5_file.hpp"
#include "io/results_file.hpp"

using Catch::Matchers::Contains;
using mdtp::DType;
using mdtp::H5File;
namespace fs = std::filesystem;

namespace {

std::string temp_path(const std::string& name) {
  auto dir = fs::temp_directory_path() / ("mdtp-faults-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::vector<char> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The file offset of a contiguous dataset's data.
haddr_t data_offset(const std::string& path, const std::string& dataset) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return offset;
}

void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  io.get(c);
  io.seekp(static_cast<std::streamoff>(offset));
  io.put(static_cast<char>(c ^ 0x10));
}

std::vector<std::string> leftovers(const std::string& path) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path()))
    if (entry.path().filename().string().rfind(fs::path(path).filename().string() + ".tmp-", 0) == 0)
      found.push_back(entry.path().string());
  return found;
}

void write_sample(H5File& file) {
  file.create_group("params");
  file.write_real("params/w", {2, 3}, {1.0, -2.5, 3.25, 0.125, 1e-3, 7.0}, DType::f32);
  file.write_real("params/b", {3}, {0.5, 1.0 / 3.0, -1e300}, DType::f64);
  file.write_int32("tokens", {4}, {0, 7, 49999, -1});
}

}  // namespace

TEST_CASE("every dataset written carries a CRC-32 of its stored bytes, and reads back verified", "[faults][io]") {
  const std::string path = temp_path("sums.h5");
  mdtp::write_atomically(path, write_sample);
  H5File file = H5File::open_read(path, "checkpoint");
  for (const char* name : {"params/w", "params/b", "tokens"}) CHECK(file.has_checksum(name));
  // The attribute is zlib's crc32 of the stored little-endian bytes, computed here independently.
  const std::vector<float> w32{1.0f, -2.5f, 3.25f, 0.125f, 1e-3f, 7.0f};
  const auto expected = static_cast<std::int64_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(w32.data()), static_cast<uInt>(w32.size() * 4)));
  CHECK(file.int_attribute("params/w", "crc32") == expected);
  CHECK(file.read_real("params/w") == std::vector<double>(w32.begin(), w32.end()));
  CHECK(file.read_real("params/b") == std::vector<double>{0.5, 1.0 / 3.0, -1e300});
  CHECK(file.read_int32("tokens") == std::vector<std::int32_t>{0, 7, 49999, -1});
}

TEST_CASE("a flipped byte in a dataset is detected and named", "[faults][io]") {
  for (const char* dataset : {"params/w", "params/b", "tokens"}) {
    INFO(dataset);
    const std::string path = temp_path("flipped.h5");
    mdtp::write_atomically(path, write_sample);
    flip_byte(path, data_offset(path, dataset) + 2);
    H5File file = H5File::open_read(path, "checkpoint");
    const std::string expected = std::string("checkpoint file '") + path + "': dataset '" + dataset +
                                 "' fails its checksum";
    if (std::string(dataset) == "tokens")
      CHECK_THROWS_WITH(file.read_int32(dataset), Contains(expected) && Contains("the file is corrupt"));
    else
      CHECK_THROWS_WITH(file.read_real(dataset), Contains(expected) && Contains("the file is corrupt"));
    // The other datasets are intact and still load.
    if (std::string(dataset) != "params/b") CHECK(file.read_real("params/b").size() == 3);
  }
}

TEST_CASE("a dataset without a checksum (an older file) still loads", "[faults][io]") {
  const std::string path = temp_path("old.h5");
  {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {3};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t d = H5Dcreate2(f, "w", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const double values[3] = {1.5, -2.0, 4.0};
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values);
    H5Dclose(d);
    H5Sclose(space);
    H5Fclose(f);
  }
  H5File file = H5File::open_read(path, "checkpoint");
  CHECK_FALSE(file.has_checksum("w"));
  CHECK(file.read_real("w") == std::vector<double>{1.5, -2.0, 4.0});
}

TEST_CASE("a checkpoint write that fails half-way leaves the earlier file intact", "[faults][io]") {
  const std::string path = temp_path("atomic.h5");
  mdtp::write_atomically(path, write_sample);
  const auto before = bytes_of(path);
  CHECK_THROWS_WITH(mdtp::write_atomically(path,
                                           [](H5File& file) {
                                             file.write_real("w", {2}, {1.0, 2.0}, DType::f64);
                                             mdtp::throw_error("disk full (simulated)");
                                           }),
                    Contains("disk full (simulated)"));
  CHECK(bytes_of(path) == before);
  CHECK(leftovers(path).empty());
}

TEST_CASE("a checkpoint write killed half-way leaves the earlier file intact", "[faults][io]") {
  const std::string path = temp_path("killed.h5");
  mdtp::write_atomically(path, write_sample);
  const auto before = bytes_of(path);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // no MPI here: the child writes and is killed in the middle of it
    mdtp::write_atomically(path, [](H5File& file) {
      file.write_real("w", {1000}, std::vector<double>(1000, 1.0), DType::f64);
      raise(SIGKILL);
    });
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(bytes_of(path) == before);
  H5File file = H5File::open_read(path, "checkpoint");
  CHECK(file.read_real("params/w").size() == 6);
  for (const auto& stale : leftovers(path)) fs::remove(stale);  // what a kill leaves: the temp file only
}

TEST_CASE("a results append that fails or is killed half-way leaves the earlier runs intact", "[faults][io]") {
  const std::string path = temp_path("results.h5");
  fs::remove(path);
  mdtp::Table table;
  table.text("op").real("seconds");
  table.row()("all_reduce")(0.5);
  mdtp::ResultsFile(path).append_run("train", {{"mode", std::string("1d")}}, {{"losses", table}});
  const auto before = bytes_of(path);

  // Fails in the middle: the run's group exists in the copy when the bad attribute is refused.
  CHECK_THROWS(mdtp::ResultsFile(path).append_run("train", {{"", std::string("bad")}}, {{"losses", table}}));
  CHECK(bytes_of(path) == before);
  CHECK(leftovers(path).empty());

  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Killed while the copy is open: a table so large its write is under way for a while.
    mdtp::Table big;
    big.real("x");
    for (int i = 0; i < 200000; ++i) big.row()(static_cast<double>(i));
    std::signal(SIGALRM, [](int) { raise(SIGKILL); });
    ualarm(20000, 0);
    for (;;) mdtp::ResultsFile(path).append_run("train", {}, {{"big", big}});
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  // Either no append completed (the file is as before) or some did: the earlier run is intact.
  CHECK(mdtp::list_runs(path).front() == "0001-train");
  CHECK(mdtp::read_table(path, "/runs/0001-train/losses").rows() == 1);
  for (const auto& stale : leftovers(path)) fs::remove(stale);

  // The same append, not interrupted, adds its run.
  mdtp::ResultsFile(path).append_run("train", {}, {{"losses", table}});
  CHECK(mdtp::list_runs(path).size() >= 2);
}
