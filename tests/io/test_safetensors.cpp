#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <numbers>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/convert.hpp"
#include "io/safetensors.hpp"

using namespace mdtp;
namespace fs = std::filesystem;

namespace {

// An empty directory of its own for each test case, so that "no file left behind" can be checked
// by listing it.
std::string fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("mdtp-safetensors-" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string le64(std::uint64_t v) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A file with this header text and `data_bytes` bytes of data; the length field says the header's
// own length unless `length` is given.
std::string raw_file(const std::string& dir, const std::string& name, const std::string& header,
                     std::size_t data_bytes, std::optional<std::uint64_t> length = std::nullopt) {
  const std::string path = dir + "/" + name;
  write_bytes(path, le64(length ? *length : header.size()) + header + std::string(data_bytes, '\x5a'));
  return path;
}

std::uint64_t bits_of(double x) {
  std::uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

std::vector<std::uint64_t> bits_of(const std::vector<double>& values) {
  std::vector<std::uint64_t> out;
  for (double v : values) out.push_back(bits_of(v));
  return out;
}

// What a file of `dtype` holds for these values: each rounded once, then widened back (exactly).
std::vector<double> stored(DType dtype, const std::vector<double>& values) {
  std::vector<unsigned char> narrow(values.size() * dtype_size(dtype));
  std::vector<double> out(values.size());
  convert_host(DType::f64, values.data(), dtype, narrow.data(), values.size());
  convert_host(dtype, narrow.data(), DType::f64, out.data(), values.size());
  return out;
}

// Values that exercise the roundings: ties, subnormals of every format, overflow of f16, signed
// zeros and infinities, NaN, and a spread of magnitudes from a fixed generator.
std::vector<double> awkward_values(std::size_t n, std::uint64_t seed) {
  const std::vector<double> special = {0.0, -0.0, 1.0 + std::ldexp(1.0, -8), 1.0 + 3 * std::ldexp(1.0, -8),
                                       1.0 + std::ldexp(1.0, -24), std::ldexp(1.0, -25), std::ldexp(1.0, -140),
                                       65520.0, -1.0e300, std::numeric_limits<double>::infinity(),
                                       std::numeric_limits<double>::quiet_NaN(), 1.0 / 3.0};
  std::vector<double> out;
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < n; ++i) {
    if ((i + seed) % 3 == 0) {
      out.push_back(special[(i + seed) % special.size()]);
      continue;
    }
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double unit = static_cast<double>(state >> 11) / static_cast<double>(1ull << 53);  // [0, 1)
    out.push_back((unit - 0.5) * std::ldexp(1.0, static_cast<int>(state % 40) - 20));
  }
  return out;
}

std::string hex(double v) {
  std::ostringstream os;
  os << std::hexfloat << v;
  return os.str();
}

// The path of python3 with numpy, or empty (then the cross-checks cannot run).
std::string numpy_python() {
  const char* from_env = std::getenv("MDTP_NUMPY_PYTHON");
  return from_env != nullptr ? from_env : MDTP_NUMPY_PYTHON;
}

int run_script(const std::string& python, const std::string& mode, const std::string& file,
               const std::string& expected) {
  const std::string command =
      "'" + python + "' '" + MDTP_SAFETENSORS_SCRIPT + "' " + mode + " '" + file + "' '" + expected + "'";
  return std::system(command.c_str());
}

// Every refusal is one line that names the file.
void check_refusal(const std::string& path, const std::string& what) {
  CAPTURE(what);
  CHECK_THROWS_WITH(SafetensorsFile::open(path),
                    Catch::Contains("safetensors file '" + path + "': ") && Catch::Contains(what));
  try {
    SafetensorsFile::open(path);
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
  }
}

const std::string kEntryF32x2 = R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";

}  // namespace

TEST_CASE("safetensors: every dtype and awkward shape round-trips, rounded once", "[io][safetensors]") {
  const std::string dir = fresh_dir("roundtrip");
  const std::string path = dir + "/model.safetensors";
  const std::vector<std::pair<DType, std::string>> dtypes = {
      {DType::f32, "F32"}, {DType::f64, "F64"}, {DType::bf16, "BF16"}, {DType::f16, "F16"}};
  const std::vector<Shape> shapes = {{}, {0}, {3, 5}, {1, 1, 7}};
  std::vector<SafetensorsTensor> tensors;
  std::uint64_t seed = 1;
  for (const auto& [dtype, name] : dtypes)
    for (const Shape& shape : shapes)
      tensors.push_back({name + "." + shape_string(shape), shape, dtype,
                         awkward_values(static_cast<std::size_t>(shape_numel(shape)), seed++)});
  // Values a float32 holds exactly come back from F32 bit for bit.
  std::vector<double> f32_exact;
  for (double v : awkward_values(15, 99)) f32_exact.push_back(static_cast<double>(static_cast<float>(v)));
  tensors.push_back({"f32.exact", {15}, DType::f32, f32_exact});
  write_safetensors(path, tensors, {{"format", "pt"}});
  CHECK(listing(dir) == std::vector<std::string>{"model.safetensors"});

  const SafetensorsFile file = SafetensorsFile::open(path);
  CHECK(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(file.data_start() % 8 == 0);  // the header is padded so that the data are aligned
  REQUIRE(file.entries().size() == tensors.size());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsTensor& t = tensors[i];
    const SafetensorsEntry& e = file.entries()[i];  // data order is the order given
    CAPTURE(t.name);
    CHECK(e.name == t.name);
    CHECK(e.dtype == t.dtype);
    CHECK(e.dtype_name == safetensors_dtype_name(t.dtype));
    CHECK(e.shape == t.shape);
    CHECK(e.begin == offset);
    CHECK(e.end - e.begin == shape_numel(t.shape) * static_cast<std::int64_t>(dtype_size(t.dtype)));
    offset = e.end;
    const std::vector<double> back = file.read(t.name);
    CHECK(bits_of(back) == bits_of(stored(t.dtype, t.values)));
    if (t.dtype == DType::f64 || t.name == "f32.exact") CHECK(bits_of(back) == bits_of(t.values));
  }
  CHECK(static_cast<std::int64_t>(fs::file_size(path)) == file.data_start() + offset);

  // The roundings themselves, worked out by hand: ties go to even, overflow to infinity.
  const double e8 = std::ldexp(1.0, -8), e11 = std::ldexp(1.0, -11), e24 = std::ldexp(1.0, -24);
  write_safetensors(path,
                    {{"bf16", {4}, DType::bf16, {1 + e8, 1 + 3 * e8, 1 + e8 + std::ldexp(1.0, -30), -(1 + e8)}},
                     {"f16", {5}, DType::f16, {1 + e11, 1 + 3 * e11, 65520.0, std::ldexp(1.0, -25), 0.75 * e24}},
                     {"f32", {2}, DType::f32, {1 + e24, 1 + 3 * e24}}},
                    {{"format", "pt"}});
  const SafetensorsFile rounded = SafetensorsFile::open(path);
  CHECK(rounded.read("bf16") == std::vector<double>{1.0, 1 + 4 * e8, 1 + 2 * e8, -1.0});
  CHECK(rounded.read("f16") ==
        std::vector<double>{1.0, 1 + 4 * e11, std::numeric_limits<double>::infinity(), 0.0, e24});
  CHECK(rounded.read("f32") == std::vector<double>{1.0, 1 + 4 * e24});
  CHECK(listing(dir) == std::vector<std::string>{"model.safetensors"});
}

TEST_CASE("safetensors: a file written by plain Python and numpy is read back exactly", "[io][safetensors]") {
  const std::string python = numpy_python();
  if (python.empty()) {
    WARN("no python3 with numpy (MDTP_NUMPY_PYTHON, found when configuring): write_safetensors.py cross-check not run");
    return;
  }
  const std::string dir = fresh_dir("from-python");
  const std::string path = dir + "/numpy.safetensors", expected_path = dir + "/expected.json";
  REQUIRE(run_script(python, "write", path, expected_path) == 0);
  const nlohmann::json expected = nlohmann::json::parse(slurp(expected_path));

  const SafetensorsFile file = SafetensorsFile::open(path);
  CHECK(file.metadata() == expected.at("metadata").get<std::map<std::string, std::string>>());
  REQUIRE(file.entries().size() == expected.at("tensors").size());
  for (const auto& t : expected.at("tensors")) {
    const std::string name = t.at("name").get<std::string>();
    CAPTURE(name);
    REQUIRE(file.has(name));
    const SafetensorsEntry& e = file.entry(name);
    CHECK(e.dtype_name == t.at("dtype").get<std::string>());
    CHECK(e.shape == t.at("shape").get<Shape>());
    if (e.dtype_name == "I32") {
      CHECK(!e.dtype.has_value());
      CHECK_THROWS_WITH(file.read(name), "safetensors file '" + path + "': tensor '" + name +
                                             "' has dtype I32; mdtp reads F32, F64, BF16 and F16");
      continue;
    }
    std::vector<double> want;
    for (const auto& v : t.at("values")) want.push_back(std::strtod(v.get<std::string>().c_str(), nullptr));
    CHECK(bits_of(file.read(name)) == bits_of(want));
  }
  // Through the checkpoint interface too.
  const SafetensorsCollection collection = SafetensorsCollection::open(path);
  CHECK(collection.names().size() == file.entries().size());
  CHECK(collection.read("scale") == std::vector<double>{std::numbers::pi});
}

TEST_CASE("safetensors: a file mdtp writes is read by plain Python and numpy", "[io][safetensors]") {
  const std::string python = numpy_python();
  if (python.empty()) {
    WARN("no python3 with numpy (MDTP_NUMPY_PYTHON, found when configuring): write_safetensors.py cross-check not run");
    return;
  }
  const std::string dir = fresh_dir("to-python");
  const std::string path = dir + "/mdtp.safetensors", expected_path = dir + "/expected.json";
  std::vector<SafetensorsTensor> tensors = {
      {"transformer.wte.weight", {3, 5}, DType::f32, awkward_values(15, 3)},
      {"scale", {}, DType::f64, {-0.1}},
      {"blöcke.0.bias", {1, 1, 7}, DType::bf16, awkward_values(7, 4)},
      {"empty", {0}, DType::f16, {}},
      {"half", {2, 3}, DType::f16, awkward_values(6, 5)},
  };
  // NaN has no one spelling in JSON text, and the rounding of NaN is held above.
  for (auto& t : tensors)
    for (double& v : t.values)
      if (std::isnan(v)) v = 2.5;
  nlohmann::json expected = {{"metadata", {{"format", "pt"}}}, {"tensors", nlohmann::json::array()}};
  for (const auto& t : tensors) {
    nlohmann::json values = nlohmann::json::array();
    for (double v : stored(t.dtype, t.values)) values.push_back(hex(v));
    expected["tensors"].push_back(
        {{"name", t.name}, {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"values", values}});
  }
  write_bytes(expected_path, expected.dump(1));
  write_safetensors(path, tensors, {{"format", "pt"}});
  CHECK(run_script(python, "verify", path, expected_path) == 0);
}

TEST_CASE("safetensors: malformed files are refused, each in one line naming what is wrong", "[io][safetensors]") {
  const std::string dir = fresh_dir("malformed");
  const auto file = [&](const std::string& name, const std::string& header, std::size_t data_bytes,
                        std::optional<std::uint64_t> length = std::nullopt) {
    return raw_file(dir, name, header, data_bytes, length);
  };
  const auto tensor = [](const std::string& name, const std::string& entry) {
    return "{\"" + name + "\": " + entry + "}";
  };

  SECTION("the header length") {
    write_bytes(dir + "/short", "12345");
    check_refusal(dir + "/short", "the file is 5 bytes, shorter than the 8-byte header length");
    write_bytes(dir + "/nothing", "");
    check_refusal(dir + "/nothing", "the file is 0 bytes, shorter than the 8-byte header length");
    check_refusal(file("zero", "", 4, 0), "header length is 0");
    check_refusal(file("huge", "{}", 0, 100'000'001), "header length 100000001 exceeds the limit of 100000000 bytes");
    check_refusal(file("past", "{}", 3, 20), "header length 20 runs past the end of the file (13 bytes leave 5 after the length)");
    check_refusal(dir + "/absent", "cannot open it (no such file)");
    fs::create_directories(dir + "/folder.safetensors");
    check_refusal(dir + "/folder.safetensors", "is not a regular file");
  }
  SECTION("the JSON") {
    check_refusal(file("cut", "{\"w\": {", 0), "header is not valid JSON ([json.exception.parse_error");
    check_refusal(file("utf8", "{\"\xff\": 1}", 0), "header is not valid JSON");
    check_refusal(file("trailing", "{} x", 0), "header is not valid JSON");
    check_refusal(file("array", "[1, 2]", 0), "header is not a JSON object (it is array)");
    check_refusal(file("twice", "{\"w\": " + kEntryF32x2 + ", \"w\": " + kEntryF32x2 + "}", 8),
                  "'w' appears twice in the header");
  }
  SECTION("a tensor entry") {
    check_refusal(file("number", tensor("w", "3"), 0), "tensor 'w': entry is not an object (got 3)");
    check_refusal(file("no-dtype", tensor("w", R"({"shape": [2], "data_offsets": [0, 8]})"), 8), "tensor 'w': no 'dtype'");
    check_refusal(file("no-shape", tensor("w", R"({"dtype": "F32", "data_offsets": [0, 8]})"), 8), "tensor 'w': no 'shape'");
    check_refusal(file("no-offsets", tensor("w", R"({"dtype": "F32", "shape": [2]})"), 8), "tensor 'w': no 'data_offsets'");
    check_refusal(file("extra", tensor("w", R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "crc": 7})"), 8),
                  "tensor 'w': unexpected key 'crc' (an entry holds dtype, shape and data_offsets only)");
    check_refusal(file("dtype-number", tensor("w", R"({"dtype": 32, "shape": [2], "data_offsets": [0, 8]})"), 8),
                  "tensor 'w': dtype 32 is not a string");
    check_refusal(file("dtype-unknown", tensor("w", R"({"dtype": "F12", "shape": [2], "data_offsets": [0, 8]})"), 8),
                  "tensor 'w': unknown dtype 'F12' (the format's dtypes are BOOL, F4,");
    for (const std::string shape : {"4", "[2, -1]", "[2.0]", "[\"2\"]", "null"})
      check_refusal(file("shape", tensor("w", R"({"dtype": "F32", "shape": )" + shape + R"(, "data_offsets": [0, 8]})"), 8),
                    "tensor 'w': shape " + nlohmann::json::parse(shape).dump() + " is not an array of non-negative integers");
    for (const std::string offsets : {"[0]", "[0, 8, 8]", "[-8, 0]", "[0, 8.5]", "\"0-8\"", "{}"})
      check_refusal(file("offsets", tensor("w", R"({"dtype": "F32", "shape": [2], "data_offsets": )" + offsets + "}"), 8),
                    "tensor 'w': data_offsets " + nlohmann::json::parse(offsets).dump() + " is not two non-negative integers");
  }
  SECTION("__metadata__") {
    check_refusal(file("meta-string", R"({"__metadata__": "pt"})", 0), "__metadata__ is not an object of strings (got \"pt\")");
    check_refusal(file("meta-value", R"({"__metadata__": {"format": "pt", "step": 7}})", 0),
                  "__metadata__ field 'step' is not a string (got 7)");
  }
  SECTION("a tensor's byte range") {
    check_refusal(file("reversed", tensor("w", R"({"dtype": "F32", "shape": [1], "data_offsets": [8, 4]})"), 8),
                  "tensor 'w': data_offsets [8, 4] end before they begin");
    check_refusal(file("beyond", tensor("w", R"({"dtype": "F32", "shape": [4], "data_offsets": [0, 16]})"), 8),
                  "tensor 'w': data_offsets [0, 16] run past the end of the 8-byte data buffer");
    check_refusal(file("size", tensor("w", R"({"dtype": "F32", "shape": [3], "data_offsets": [0, 8]})"), 8),
                  "tensor 'w': data_offsets [0, 8] hold 8 bytes but shape [3] of F32 needs 12");
    check_refusal(file("bits", tensor("w", R"({"dtype": "F4", "shape": [3], "data_offsets": [0, 2]})"), 2),
                  "tensor 'w': shape [3] of F4 is not a whole number of bytes");
    check_refusal(file("overflow", tensor("w", R"({"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 8]})"), 8),
                  "tensor 'w': shape [4611686018427387904, 4] of F32 has more bytes than a 64-bit count holds");
  }
  SECTION("overlaps and holes") {
    check_refusal(file("overlap", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12),
                  "tensor 'b' at bytes [4, 12) overlaps tensor 'a' at bytes [0, 8)");
    check_refusal(file("same", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                   "b": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})", 8),
                  "tensor 'b' at bytes [0, 8) overlaps tensor 'a' at bytes [0, 8)");
    check_refusal(file("hole", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})", 12),
                  "bytes [4, 8) of the data buffer belong to no tensor (a hole between tensor 'a' and tensor 'b')");
    check_refusal(file("lead", tensor("a", R"({"dtype": "F32", "shape": [1], "data_offsets": [4, 8]})"), 8),
                  "bytes [0, 4) of the data buffer belong to no tensor (a hole before the first tensor 'a')");
    check_refusal(file("tail", tensor("a", R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})"), 8),
                  "bytes [4, 8) of the data buffer belong to no tensor (after the last tensor 'a')");
    check_refusal(file("none", "{}", 4), "bytes [0, 4) of the data buffer belong to no tensor (the header names none)");
    // A line break in a name is spelled out, so that the refusal stays one line.
    check_refusal(file("break", tensor("a\\nb", R"({"dtype": "F32", "shape": [1], "data_offsets": [0, 4]})"), 8),
                  "(after the last tensor 'a\\nb')");
  }
}

TEST_CASE("safetensors: what the format allows is accepted", "[io][safetensors]") {
  const std::string dir = fresh_dir("accepted");
  SECTION("empty tensors sharing an offset, padding, every dtype of the format") {
    // Spaces after the JSON are how writers align the data; empty tensors take no bytes, so two
    // may start where another does.
    const std::string header = R"({"e1": {"dtype": "F64", "shape": [0, 3], "data_offsets": [0, 0]},
        "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
        "e2": {"dtype": "BF16", "shape": [2, 0], "data_offsets": [4, 4]},
        "ids": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]},
        "fp8": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [12, 14]},
        "fp4": {"dtype": "F4", "shape": [2, 2], "data_offsets": [14, 16]},
        "e3": {"dtype": "F16", "shape": [0], "data_offsets": [16, 16]}})" + std::string(5, ' ');
    const std::string path = raw_file(dir, "ok.safetensors", header, 16);
    const SafetensorsFile file = SafetensorsFile::open(path);
    std::vector<std::string> order;
    for (const auto& e : file.entries()) order.push_back(e.name);
    CHECK(order == std::vector<std::string>{"e1", "a", "e2", "ids", "fp8", "fp4", "e3"});
    CHECK(file.metadata().empty());
    CHECK(file.read("e1").empty());
    CHECK(file.read("e2").empty());
    CHECK(file.entry("fp8").dtype_name == "F8_E4M3");
    CHECK(!file.entry("fp8").dtype.has_value());
    CHECK_THROWS_WITH(file.read("fp8"), "safetensors file '" + path +
                                            "': tensor 'fp8' has dtype F8_E4M3; mdtp reads F32, F64, BF16 and F16");
    CHECK_THROWS_WITH(file.read("ids"), Catch::Contains("tensor 'ids' has dtype I64; mdtp reads F32, F64, BF16 and F16"));
    CHECK_THROWS_WITH(file.entry("nope"), "safetensors file '" + path + "': no tensor 'nope'");
  }
  SECTION("a header with nothing in it") {
    const SafetensorsFile file = SafetensorsFile::open(raw_file(dir, "empty.safetensors", "{}", 0));
    CHECK(file.entries().empty());
  }
  SECTION("a file of no tensors, written") {
    write_safetensors(dir + "/none.safetensors", {}, {});
    CHECK(SafetensorsFile::open(dir + "/none.safetensors").entries().empty());
  }
}

TEST_CASE("safetensors: a sharded checkpoint is read through its index", "[io][safetensors]") {
  const std::string dir = fresh_dir("sharded");
  const std::string shard1 = "model-00001-of-00002.safetensors", shard2 = "model-00002-of-00002.safetensors";
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {-0.5}, c = {0.25, 0.125};
  write_safetensors(dir + "/" + shard1, {{"a", {2, 3}, DType::f32, a}, {"b", {}, DType::f64, b}}, {{"format", "pt"}});
  write_safetensors(dir + "/" + shard2, {{"c", {2}, DType::bf16, c}}, {{"format", "pt"}});
  const auto index = [&](const std::string& name, const nlohmann::json& weight_map) {
    const std::string path = dir + "/" + name;
    write_bytes(path, nlohmann::json{{"metadata", {{"total_size", 36}}}, {"weight_map", weight_map}}.dump());
    return path;
  };

  const std::string good = index("model.safetensors.index.json", {{"a", shard1}, {"b", shard1}, {"c", shard2}});
  const SafetensorsCollection collection = SafetensorsCollection::open(good);
  CHECK(collection.names() == std::vector<std::string>{"a", "b", "c"});
  CHECK(collection.read("a") == a);
  CHECK(collection.read("b") == b);
  CHECK(collection.read("c") == c);
  CHECK(collection.entry("a").shape == Shape{2, 3});
  CHECK(collection.entry("c").dtype == DType::bf16);
  CHECK(collection.file_of("c") == dir + "/" + shard2);
  CHECK(collection.has("b"));
  CHECK(!collection.has("z"));
  CHECK(collection.metadata().at("total_size") == "36");
  CHECK_THROWS_WITH(collection.read("z"), "safetensors checkpoint '" + good + "': no tensor 'z'");

  // One file opens through the same interface.
  const SafetensorsCollection single = SafetensorsCollection::open(dir + "/" + shard1);
  CHECK(single.names() == std::vector<std::string>{"a", "b"});
  CHECK(single.read("b") == b);
  CHECK(single.metadata().at("format") == "pt");

  const std::string absent = index("absent.index.json", {{"a", shard1}, {"b", shard1}, {"c", shard2}, {"d", shard2}});
  CHECK_THROWS_WITH(SafetensorsCollection::open(absent),
                    "safetensors index '" + absent + "': weight_map puts tensor 'd' in shard '" + shard2 + "', but '" +
                        dir + "/" + shard2 + "' has no such tensor");
  const std::string unlisted = index("unlisted.index.json", {{"a", shard1}, {"c", shard2}});
  CHECK_THROWS_WITH(SafetensorsCollection::open(unlisted),
                    "safetensors index '" + unlisted + "': shard '" + shard1 + "' holds tensor 'b', which weight_map does not list");
  const std::string elsewhere = index("elsewhere.index.json", {{"a", shard1}, {"b", shard2}, {"c", shard2}});
  CHECK_THROWS_WITH(SafetensorsCollection::open(elsewhere),
                    Catch::Contains("weight_map puts tensor 'b' in shard '" + shard2 + "'") ||
                        Catch::Contains("holds tensor 'b', which weight_map puts in shard '" + shard2 + "'"));
  const std::string missing = index("missing.index.json", {{"a", "gone.safetensors"}});
  CHECK_THROWS_WITH(SafetensorsCollection::open(missing),
                    "safetensors file '" + dir + "/gone.safetensors': cannot open it (no such file)");
  write_bytes(dir + "/bad.index.json", R"({"metadata": {}})");
  CHECK_THROWS_WITH(SafetensorsCollection::open(dir + "/bad.index.json"),
                    "safetensors index '" + dir + "/bad.index.json': no \"weight_map\" object");
  write_bytes(dir + "/number.index.json", R"({"weight_map": {"a": 1}})");
  CHECK_THROWS_WITH(SafetensorsCollection::open(dir + "/number.index.json"),
                    Catch::Contains("weight_map entry of tensor 'a' is not a file name (got 1)"));
  write_bytes(dir + "/cut.index.json", R"({"weight_map": )");
  CHECK_THROWS_WITH(SafetensorsCollection::open(dir + "/cut.index.json"), Catch::Contains("not valid JSON"));
}

TEST_CASE("safetensors: the streaming writer takes tensors in layout order or any order, or leaves nothing", "[io][safetensors]") {
  const std::string dir = fresh_dir("writer");
  const std::string path = dir + "/stream.safetensors";
  const std::vector<SafetensorsEntrySpec> layout = {{"a", {2, 3}, DType::f32}, {"b", {4}, DType::bf16}};
  const std::vector<double> a = {1, 2, 3, 4, 5, 6}, b = {0.5, -1, 1.0 / 3.0, 7};

  SECTION("in order, with refusals on the way that write nothing") {
    {
      SafetensorsWriter writer(path, layout, {{"format", "pt"}});
      CHECK(fs::exists(writer.temporary_path()));
      CHECK(fs::path(writer.temporary_path()).parent_path() == fs::path(path).parent_path());
      CHECK(!fs::exists(path));
      CHECK_THROWS_WITH(writer.write_next("b", b), "writing safetensors file '" + path +
                                                       "': tensor 'b' given out of order: the layout's next tensor (1 of 2) is 'a'");
      CHECK_THROWS_WITH(writer.write_next("a", {1, 2, 3, 4, 5}),
                        Catch::Contains("tensor 'a' has shape [2, 3] (6 elements) but 5 values were given"));
      writer.write_next("a", a);
      CHECK_THROWS_WITH(writer.finish(), Catch::Contains("finish() after 1 of 2 tensors; tensor 'b' was not written"));
      writer.write_next("b", b);
      CHECK_THROWS_WITH(writer.write_next("c", {1.0}), Catch::Contains("tensor 'c' given after all 2 tensors of the layout"));
      writer.finish();
      CHECK_THROWS_WITH(writer.finish(), Catch::Contains("finish() after finish() or a failed write"));
    }
    CHECK(listing(dir) == std::vector<std::string>{"stream.safetensors"});
    const SafetensorsFile file = SafetensorsFile::open(path);
    CHECK(file.read("a") == a);
    CHECK(file.read("b") == stored(DType::bf16, b));
    CHECK(file.metadata().at("format") == "pt");
  }
  SECTION("in any order with write(): each tensor lands at its place in the layout") {
    const std::vector<SafetensorsEntrySpec> three = {
        {"a", {2, 3}, DType::f32}, {"b", {4}, DType::bf16}, {"c", {3}, DType::f64}};
    const std::vector<double> c = {1.0 / 7.0, -2.5, 1e300};
    {
      SafetensorsWriter writer(path, three, {});
      writer.write("c", c);
      CHECK_THROWS_WITH(writer.write("c", c), Catch::Contains("tensor 'c' given twice"));
      CHECK_THROWS_WITH(writer.write("d", c), Catch::Contains("tensor 'd' is not in the layout"));
      CHECK_THROWS_WITH(writer.finish(), Catch::Contains("finish() after 1 of 3 tensors; tensor 'a' was not written"));
      writer.write_next("a", a);  // the first tensor not written yet
      CHECK_THROWS_WITH(writer.write_next("c", c), Catch::Contains("the layout's next tensor (2 of 3) is 'b'"));
      writer.write("b", b);
      writer.finish();
    }
    const SafetensorsFile file = SafetensorsFile::open(path);
    CHECK(file.read("a") == a);
    CHECK(file.read("b") == stored(DType::bf16, b));
    CHECK(file.read("c") == c);
    // The bytes are those of the same tensors written in order.
    const std::string any_order = slurp(path);
    write_safetensors(path, {{"a", {2, 3}, DType::f32, a}, {"b", {4}, DType::bf16, b}, {"c", {3}, DType::f64, c}}, {});
    CHECK(slurp(path) == any_order);
  }
  SECTION("destroyed before finish(): neither the target nor a temporary file is left") {
    std::string temp;
    {
      SafetensorsWriter writer(path, layout, {{"format", "pt"}});
      temp = writer.temporary_path();
      writer.write_next("a", a);
      writer.write_next("b", b);
      CHECK(fs::exists(temp));
    }
    CHECK(!fs::exists(temp));
    CHECK(listing(dir).empty());
  }
  SECTION("an existing file at the target is untouched by a failed write, and replaced by a good one") {
    write_bytes(path, "precious bytes");
    {
      SafetensorsWriter writer(path, layout, {});
      writer.write_next("a", a);
      CHECK_THROWS(writer.write_next("b", {1.0}));
    }
    CHECK(slurp(path) == "precious bytes");
    CHECK_THROWS_WITH(write_safetensors(path, {{"a", {2, 3}, DType::f32, a}, {"b", {4}, DType::bf16, {1.0}}}, {}),
                      Catch::Contains("tensor 'b' has shape [4] (4 elements) but 1 values were given"));
    CHECK(slurp(path) == "precious bytes");
    CHECK(listing(dir) == std::vector<std::string>{"stream.safetensors"});
    write_safetensors(path, {{"a", {2, 3}, DType::f32, a}}, {{"format", "pt"}});
    CHECK(SafetensorsFile::open(path).read("a") == a);
    CHECK(listing(dir) == std::vector<std::string>{"stream.safetensors"});
  }
  SECTION("a layout that cannot be written is refused before anything is created") {
    CHECK_THROWS_WITH(SafetensorsWriter(path, {{"a", {1}, DType::f32}, {"a", {2}, DType::f32}}, {}),
                      "writing safetensors file '" + path + "': tensor 'a' appears twice in the layout");
    CHECK_THROWS_WITH(SafetensorsWriter(path, {{"__metadata__", {1}, DType::f32}}, {}),
                      Catch::Contains("a tensor may not be named '__metadata__'"));
    CHECK_THROWS_WITH(SafetensorsWriter(path, {{"w", {2, -1}, DType::f32}}, {}),
                      Catch::Contains("tensor 'w': shape [2, -1] has a negative extent"));
    CHECK_THROWS_WITH(SafetensorsWriter(path, {{"w\xff", {1}, DType::f32}}, {}), Catch::Contains("is not valid UTF-8"));
    CHECK(listing(dir).empty());
  }
}
