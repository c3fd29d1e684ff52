// The search for the first non-finite gradient element (zero/nonfinite.hpp): unsharded tensors in
// order, and a ZeRO shard mapped back to parameters through its segments, padding never named.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.hpp"
#include "zero/nonfinite.hpp"

using mdtp::DType;
using mdtp::Tensor;

namespace {

Tensor host(std::vector<double> values, DType dtype) {
  auto t = Tensor::empty({static_cast<std::int64_t>(values.size())}, dtype, std::make_shared<mdtp::HostAllocator>(),
                         mdtp::MemCategory::other);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::f32) t.data<float>()[i] = static_cast<float>(values[i]);
    else t.data<double>()[i] = values[i];
  }
  return t;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

TEST_CASE("the first non-finite element of unsharded gradients is named by tensor", "[faults]") {
  for (DType dtype : {DType::f32, DType::f64}) {
    INFO(mdtp::dtype_name(dtype));
    const std::vector<std::pair<std::string, Tensor>> clean{{"wte", host({1, 2, 3}, dtype)},
                                                            {"h0.attn.w", host({0, -1e30, 1e-30}, dtype)}};
    CHECK_FALSE(mdtp::first_nonfinite(clean).has_value());

    const std::vector<std::pair<std::string, Tensor>> named{{"wte", host({1, 2, 3}, dtype)},
                                                            {"h0.attn.w", host({0, 5, -kInf, kNaN}, dtype)},
                                                            {"h1.mlp.w", host({kNaN}, dtype)}};
    const auto hit = mdtp::first_nonfinite(named);
    REQUIRE(hit.has_value());
    CHECK(hit->tensor == "h0.attn.w");
    CHECK(hit->element == 2);
    CHECK(std::string(mdtp::nonfinite_name(hit->value)) == "-Inf");
    CHECK(mdtp::first_nonfinite_index(named[2].second) == 0);
    CHECK(std::string(mdtp::nonfinite_name(kNaN)) == "NaN");
    CHECK(std::string(mdtp::nonfinite_name(kInf)) == "+Inf");
  }
}

TEST_CASE("a non-finite element of a ZeRO shard is mapped back to its parameter", "[faults]") {
  // A shard of 16: parameter 1's elements 10..15 at 0..5, padding at 6..7, parameter 0's elements
  // 0..5 at 8..13, padding at 14..15.  Segments are given out of shard order on purpose.
  const std::vector<std::string> names{"h0.ln.g", "h0.mlp.fc.w"};
  const std::vector<mdtp::ShardSegment> segments{{0, 0, 8, 6}, {1, 10, 0, 6}};
  std::vector<double> values(16, 0.5);
  values[6] = kNaN;  // padding: never named
  values[15] = kInf;
  CHECK_FALSE(mdtp::first_nonfinite_in_shard(host(values, DType::f32), segments, names).has_value());

  values[11] = kInf;  // parameter 0, element 3
  auto hit = mdtp::first_nonfinite_in_shard(host(values, DType::f32), segments, names);
  REQUIRE(hit.has_value());
  CHECK(hit->tensor == "h0.ln.g");
  CHECK(hit->element == 3);

  values[4] = kNaN;  // parameter 1, element 14: earlier in the shard
  hit = mdtp::first_nonfinite_in_shard(host(values, DType::f64), segments, names);
  REQUIRE(hit.has_value());
  CHECK(hit->tensor == "h0.mlp.fc.w");
  CHECK(hit->element == 14);
  CHECK(std::isnan(hit->value));

  const std::vector<mdtp::ShardSegment> outside{{0, 0, 12, 6}};
  CHECK_THROWS(mdtp::first_nonfinite_in_shard(host(values, DType::f32), outside, names));
}
