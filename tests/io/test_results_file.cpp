#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "io/results_file.hpp"

using namespace mdtp;

namespace {
std::string temp_path(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("mdtp-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
}  // namespace

TEST_CASE("runs are appended, never overwritten, and read back exactly", "[io]") {
  std::string path = temp_path("results.h5");
  std::filesystem::remove(path);
  Table t;
  t.text("group").text("op").integer("bytes").real("seconds");
  t.row()("tp.row")("broadcast")(std::int64_t{1234567})(0.25);
  t.row()("tp.col-dep")("all_reduce")(std::int64_t{8})(1.5e-6);
  std::string first, second;
  {
    ResultsFile f(path);
    first = f.append_run("bench", {{"mode", std::string("2d")}, {"world", std::int64_t{8}}, {"ratio", 1.5}}, {{"ledger", t}});
  }
  {
    ResultsFile f(path);
    second = f.append_run("bench", {{"mode", std::string("3d")}}, {{"ledger", t}});
  }
  CHECK(first == "/runs/0001-bench");
  CHECK(second == "/runs/0002-bench");
  CHECK(list_runs(path) == std::vector<std::string>{"0001-bench", "0002-bench"});
  Table back = read_table(path, first + "/ledger");
  CHECK(back.names() == t.names());
  CHECK(std::get<std::vector<std::string>>(back.column("group")) == std::vector<std::string>{"tp.row", "tp.col-dep"});
  CHECK(std::get<std::vector<std::int64_t>>(back.column("bytes")) == std::vector<std::int64_t>{1234567, 8});
  CHECK(std::get<std::vector<double>>(back.column("seconds")) == std::vector<double>{0.25, 1.5e-6});
  Attributes a = read_attributes(path, first);
  CHECK(std::get<std::string>(a.at("mode")) == "2d");
  CHECK(std::get<std::int64_t>(a.at("world")) == 8);
  CHECK(std::get<double>(a.at("ratio")) == 1.5);
  CHECK(std::get<std::string>(read_attributes(path, second).at("mode")) == "3d");
}

TEST_CASE("an empty table round-trips", "[io]") {
  std::string path = temp_path("empty.h5");
  std::filesystem::remove(path);
  Table t;
  t.text("name").integer("count").real("value");
  std::string run = ResultsFile(path).append_run("empty", {}, {{"rows", t}});
  Table back = read_table(path, run + "/rows");
  CHECK(back.names() == t.names());
  CHECK(back.rows() == 0);
}

TEST_CASE("a file that is not HDF5 is refused and left untouched", "[io]") {
  std::string path = temp_path("notes.txt");
  { std::ofstream(path) << "precious notes\n"; }
  CHECK_THROWS_WITH(ResultsFile(path), Catch::Contains("is not an HDF5 file") && Catch::Contains(path));
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "precious notes");
}

TEST_CASE("table rows are checked against the columns", "[io]") {
  Table t;
  t.text("a").integer("b");
  CHECK_THROWS_WITH(t.row()(1.0), Catch::Contains("does not hold real values"));
  CHECK_THROWS_WITH(t.row()("x"), Catch::Contains("1 values for 2 columns"));
}
