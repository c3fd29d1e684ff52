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
#include <array>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "faults/corrupt_file.hpp"
#include "io/h5_file.hpp"
#include "io/results_file.hpp"

using Catch::Matchers::Contains;
using mdtp::DType;
using mdtp::H5File;
using mdtp::testing::data_offset;
using mdtp::testing::flip_byte;
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

TEST_CASE("a dataset of reals or integers wider than 8 bytes is refused by name", "[faults][io]") {
  // Another tool's file: 16-byte floats (long double on x86-64) and 16-byte integers.  A verified
  // read holds the stored bytes in the double or int64 buffer before converting them in place.
  const std::string path = temp_path("wide.h5");
  {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t dims[1] = {2};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t wide_real = H5Tcopy(H5T_NATIVE_LDOUBLE);
    H5Tset_size(wide_real, 16);
    hid_t wide_int = H5Tcopy(H5T_STD_I64LE);
    H5Tset_precision(wide_int, 128);
    for (auto [name, type] : {std::pair{"r", wide_real}, std::pair{"i", wide_int}}) {
      hid_t d = H5Dcreate2(f, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dclose(d);
    }
    H5Tclose(wide_real);
    H5Tclose(wide_int);
    H5Sclose(space);
    H5Fclose(f);
  }
  H5File file = H5File::open_read(path, "checkpoint");
  CHECK_THROWS_WITH(file.read_real("r"), Contains("dataset 'r' holds 16-byte reals; expected at most 8 bytes"));
  CHECK_THROWS_WITH(file.read_int32("i"), Contains("dataset 'i' holds 16-byte integers; expected at most 8 bytes"));
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

TEST_CASE("tile checksums: a reader of part of a dataset verifies only the tiles it reads", "[faults][io]") {
  // 3000 x 500 f64 (12 MB: tiles of 362 x 362, 9 down and 2 across) and 700000 f32 (2.8 MB: tiles
  // of 262144 elements), with values that name their index.
  const std::int64_t rows = 3000, cols = 500, n1 = 700000;
  std::vector<double> matrix(static_cast<std::size_t>(rows * cols)), vector(static_cast<std::size_t>(n1));
  for (std::size_t i = 0; i < matrix.size(); ++i) matrix[i] = static_cast<double>(i) + 0.25;
  for (std::size_t i = 0; i < vector.size(); ++i) vector[i] = static_cast<double>(i % 4096) - 0.5;
  const auto write = [&](H5File& file) {
    file.write_real("m", {rows, cols}, matrix, DType::f64);
    file.write_real("v", {n1}, vector, DType::f32);
  };
  const std::string path = temp_path("tiles.h5");
  mdtp::write_atomically(path, write);
  {
    H5File file = H5File::open_read(path, "checkpoint");
    REQUIRE(file.has_tile_checksums("m"));
    REQUIRE(file.has_tile_checksums("v"));
    // Awkward blocks — inside one tile, across tiles, whole rows, whole columns — read back exactly.
    for (const auto& [r0, nr, c0, nc] : std::vector<std::array<std::int64_t, 4>>{
             {0, 1, 0, 500}, {361, 2, 360, 5}, {17, 1300, 499, 1}, {2999, 1, 0, 500}, {1, 2998, 3, 490}}) {
      const std::vector<double> got = file.read_real_block("m", r0, nr, c0, nc);
      REQUIRE(got.size() == static_cast<std::size_t>(nr * nc));
      std::size_t wrong = 0;
      for (std::int64_t r = 0; r < nr; ++r)
        for (std::int64_t c = 0; c < nc; ++c)
          wrong += got[static_cast<std::size_t>(r * nc + c)] != matrix[static_cast<std::size_t>((r0 + r) * cols + c0 + c)];
      CHECK(wrong == 0);
    }
    const std::vector<double> tail = file.read_real_block("v", 0, 1, 262140, 9);
    CHECK(tail == std::vector<double>(vector.begin() + 262140, vector.begin() + 262149));
  }
  // A byte flipped in tile (8, 0) of m (row 2900, column 10) and in the last tile of v: reads that
  // stay in other tiles — every row of columns 400..409, as a Linear weight's column block is
  // read — still succeed; reads that touch a bad tile, and whole reads, fail naming the tile.
  flip_byte(path, data_offset(path, "m") + static_cast<std::uint64_t>((2900 * cols + 10) * 8 + 3));
  flip_byte(path, data_offset(path, "v") + static_cast<std::uint64_t>(600000 * 4 + 1));
  H5File file = H5File::open_read(path, "checkpoint");
  CHECK(file.read_real_block("m", 0, 3000, 400, 10).size() == 30000);
  CHECK(file.read_real_block("m", 0, 2896, 0, 500).size() == 2896 * 500);
  CHECK(file.read_real_block("v", 0, 1, 0, 524288).size() == 524288);
  const std::string prefix = "checkpoint file '" + path + "': dataset '";
  CHECK_THROWS_WITH(file.read_real_block("m", 2899, 2, 0, 5),
                    Contains(prefix + "m' fails its checksum (tile rows [2896, 3000) x columns [0, 362): crc32 stored"));
  CHECK_THROWS_WITH(file.read_real_block("v", 0, 1, 600000, 1),
                    Contains(prefix + "v' fails its checksum (tile rows [524288, 700000) x columns [0, 1)"));
  CHECK_THROWS_WITH(file.read_real("m"), Contains(prefix + "m' fails its checksum (crc32 stored"));
  CHECK_THROWS_WITH(file.verify_checksum("v"), Contains(prefix + "v' fails its checksum"));
}

TEST_CASE("a dataset with a whole checksum but no tile checksums (an older file) is read by block unverified",
          "[faults][io]") {
  const std::string path = temp_path("untiled.h5");
  mdtp::write_atomically(path, [](H5File& file) { file.write_real("w", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, DType::f64); });
  {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, "w", H5P_DEFAULT);
    H5Adelete(d, "crc32_tile_shape");
    H5Adelete(d, "crc32_tiles");
    H5Dclose(d);
    H5Fclose(f);
  }
  flip_byte(path, data_offset(path, "w") + 3 * 3 * 8 + 7);  // row 3, column 0: the top byte of 10
  H5File file = H5File::open_read(path, "checkpoint");
  CHECK(file.has_checksum("w"));
  CHECK_FALSE(file.has_tile_checksums("w"));
  CHECK(file.read_real_block("w", 1, 2, 1, 2) == std::vector<double>{5, 6, 8, 9});
  CHECK(file.read_real_block("w", 3, 1, 0, 1) != std::vector<double>{10});  // unverified: the flipped value
  CHECK_THROWS_WITH(file.verify_checksum("w"), Contains("dataset 'w' fails its checksum"));
}
