// Parameter initialisation keeps init_value's numbers: pinned values of the original formula,
// InitDraw::fill bitwise in f64 and float-exact in f32 (its vectorised path) on awkward column
// maps, and the per-element function the formula defines.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>

#include "core/backend.hpp"
#include "core/error.hpp"
#include "tp/parameter.hpp"

using namespace mdtp;

namespace {

// The definition, as first written (and as every checkpoint and run before was initialised).
std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
std::uint64_t name_hash(const std::string& name) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ULL;
  return h;
}
double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }
double reference(std::uint64_t seed, const std::string& name, std::int64_t flat_index, double std) {
  std::uint64_t base = mix(seed ^ mix(name_hash(name)) ^ mix(static_cast<std::uint64_t>(flat_index) * 2 + 1));
  double u1 = unit_open(mix(base)), u2 = unit_open(mix(base + 1));
  return std * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("init_value keeps its pinned numbers", "[core][init]") {
  const InitSpec normal{InitSpec::Kind::normal, 0.02, 0.0};
  CHECK(same_bits(init_value(1234, "transformer.wte.weight", 0, normal), 0x1.20dcd61b0f06dp-6));
  CHECK(same_bits(init_value(1234, "transformer.h.0.attn.c_attn.weight", 12345, normal), 0x1.87afa3c6c012ap-6));
  CHECK(same_bits(init_value(7, "x", 1000003, InitSpec{InitSpec::Kind::normal, 1.0, 0.0}), 0x1.185d00647af59p-1));
  CHECK(init_value(7, "x", 5, InitSpec{InitSpec::Kind::constant, 0.0, 0.25}) == 0.25);
}

TEST_CASE("InitDraw::fill is init_value: bitwise for f64, the same floats for f32", "[core][init]") {
  const std::string name = "transformer.h.3.mlp.c_fc.weight";
  const InitSpec spec{InitSpec::Kind::normal, 0.02, 0.0};
  const InitDraw draw(99, name, spec);
  // A head-grouped-like column map (runs, gaps, a permutation) of odd length, and plain runs.
  std::vector<std::int64_t> permuted;
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t w = 0; w < 37; ++w) permuted.push_back((w % 3) * 111 + b * 37 + w / 3);
  std::vector<std::int64_t> plain(1027);
  std::iota(plain.begin(), plain.end(), 5);
  std::int64_t f32_elements = 0;
  for (const auto* columns : {&permuted, &plain})
    for (std::int64_t row = 0; row < 300; ++row) {
      const std::int64_t n = static_cast<std::int64_t>(columns->size()), offset = row * 4096;
      std::vector<double> f64(static_cast<std::size_t>(n)), f32(static_cast<std::size_t>(n));
      draw.fill(offset, columns->data(), n, DType::f64, f64.data());
      draw.fill(offset, columns->data(), n, DType::f32, f32.data());
      for (std::int64_t j = 0; j < n; ++j) {
        const double ref = reference(99, name, offset + (*columns)[static_cast<std::size_t>(j)], 0.02);
        if (!same_bits(f64[static_cast<std::size_t>(j)], ref)) FAIL_CHECK("f64 value differs at " << offset + j);
        if (static_cast<float>(f32[static_cast<std::size_t>(j)]) != static_cast<float>(ref))
          FAIL_CHECK("f32 value differs at " << offset + j);
      }
      f32_elements += n;
    }
  CHECK(f32_elements > 300000);
  // One element at a time, and constants.
  CHECK(same_bits(draw.value(77), reference(99, name, 77, 0.02)));
  const InitDraw ones(99, name, InitSpec{InitSpec::Kind::constant, 0.0, 1.0});
  std::vector<double> out(plain.size());
  ones.fill(0, plain.data(), static_cast<std::int64_t>(plain.size()), DType::f32, out.data());
  CHECK(out == std::vector<double>(plain.size(), 1.0));
}

TEST_CASE("assign_drawn gives every element its own draw, however many pieces are drawn at once",
          "[core][init]") {
  const auto backend = make_host_backend();
  const std::string name = "transformer.h.0.attn.c_attn.weight";
  const InitDraw draw(5, name, InitSpec{InitSpec::Kind::normal, 0.02, 0.0});
  // Rows of 1000 (pieces of 65 rows), 333 rows: six pieces, the last one short.
  const std::int64_t rows = 333, cols = 1000;
  Tensor value = backend->empty({rows, cols}, DType::f64, MemCategory::parameters);
  std::vector<std::int64_t> columns(static_cast<std::size_t>(cols));
  std::iota(columns.begin(), columns.end(), 0);
  for (int threads : {1, 2, 4, 7}) {  // one piece at a time, and several (a short last batch at 4)
    INFO("threads " << threads);
    backend->fill(value, 0.0);
    assign_drawn(*backend, value, cols, threads, [&](std::int64_t first, std::int64_t n, double* out) {
      for (std::int64_t k = 0; k < n; k += cols) draw.fill(first + k, columns.data(), cols, DType::f64, out + k);
    });
    const std::vector<double> got = backend->to_f64(value);
    std::int64_t differ = 0;
    for (std::int64_t i = 0; i < rows * cols; ++i)
      if (!same_bits(got[static_cast<std::size_t>(i)], reference(5, name, i, 0.02))) ++differ;
    CHECK(differ == 0);
  }

  // A draw that fails in one piece (whichever thread drew it) fails the whole call with its error.
  REQUIRE_THROWS_WITH(assign_drawn(*backend, value, cols, 4,
                                   [&](std::int64_t first, std::int64_t n, double* out) {
                                     if (first >= 3 * 65 * cols) throw_error("piece at ", first, " refused");
                                     std::fill(out, out + n, 0.0);
                                   }),
                      Catch::Contains("piece at 195000 refused"));
}
