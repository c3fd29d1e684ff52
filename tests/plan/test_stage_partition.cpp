// StagePartition: even and explicit splits, round-robin virtual stages, and every split that
// would drop, repeat or misplace a layer refused with the value named.
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "plan/stage_partition.hpp"

using namespace mdtp;
using Catch::Contains;

TEST_CASE("an even split puts the embedding first, the head last, and blocks in between", "[plan][partition]") {
  const StagePartition p(6, 3, 1);
  CHECK(p.units(0) == UnitSpan{0, 2});  // embedding + blocks 0, 1
  CHECK(p.units(1) == UnitSpan{3, 4});
  CHECK(p.units(2) == UnitSpan{5, 7});  // blocks 4, 5 + head
  CHECK(p.describe() == "[0-2] [3-4] [5-7]");
  const StagePartition one(4, 1, 1);
  CHECK(one.units(0) == UnitSpan{0, 5});
}

TEST_CASE("interleaved chunks are assigned round-robin", "[plan][partition]") {
  // 8 layers, p = 2, v = 2: stage 0 holds blocks [0, 1] and [4, 5], stage 1 [2, 3] and [6, 7].
  const StagePartition p(8, 2, 2);
  CHECK(p.stage_units(0) == std::vector<UnitSpan>{{0, 2}, {5, 6}});
  CHECK(p.stage_units(1) == std::vector<UnitSpan>{{3, 4}, {7, 9}});
  CHECK(p.virtual_stage(1, 1) == 3);
  CHECK(p.stage_of(3) == 1);
  CHECK(p.chunk_of(3) == 1);
}

TEST_CASE("an explicit split may be uneven and may leave the ends without blocks", "[plan][partition]") {
  const StagePartition p(16, 4, 1, {3, 5, 5, 3});
  CHECK(p.units(0) == UnitSpan{0, 3});
  CHECK(p.units(1) == UnitSpan{4, 8});
  CHECK(p.units(3) == UnitSpan{14, 17});
  const StagePartition ends(4, 3, 1, {0, 4, 0});
  CHECK(ends.units(0) == UnitSpan{0, 0});  // the embedding alone
  CHECK(ends.units(1) == UnitSpan{1, 4});
  CHECK(ends.units(2) == UnitSpan{5, 5});  // the head alone
  CHECK(parse_layer_split("3,5,5,3") == std::vector<int>{3, 5, 5, 3});
}

TEST_CASE("splits that lose, repeat or misplace a layer are refused", "[plan][partition][errors]") {
  CHECK_THROWS_WITH(StagePartition(7, 2, 1), Contains("7 layers do not split evenly over pp=2") && Contains("--pp-layers"));
  CHECK_THROWS_WITH(StagePartition(8, 2, 1, {3, 4}), Contains("sums to 7 layers; the model has 8") &&
                                                         Contains("neither drop nor repeat"));
  CHECK_THROWS_WITH(StagePartition(8, 2, 1, {5, 4}), Contains("sums to 9"));
  CHECK_THROWS_WITH(StagePartition(8, 2, 2, {4, 4}), Contains("2 entries; pp=2 × chunks=2 needs 4"));
  CHECK_THROWS_WITH(StagePartition(8, 3, 1, {4, 0, 4}), Contains("virtual stage 1 no layer"));
  CHECK_THROWS_WITH(StagePartition(8, 2, 1, {-1, 9}), Contains("counts must be >= 0"));
  CHECK_THROWS_WITH(StagePartition(8, 0, 1), Contains("pp=0"));
  CHECK_THROWS_WITH(parse_layer_split("3,x,5"), Contains("'x' is not one"));
  CHECK_THROWS_WITH(parse_layer_split("3,-2"), Contains("'-2'"));
}
