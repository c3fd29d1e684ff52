// The bucket plan (src/plan/bucket_plan.hpp), a pure function: backward order, homogeneous
// buckets, the size cap, alignment and padding, unit-aligned buckets, refusals.  Every rank
// computes the same, so the checks run on each.
#include <catch2/catch.hpp>

#include <cmath>

#include "plan/bucket_plan.hpp"

using namespace mdtp;

namespace {

BucketInput param(const char* name, std::int64_t numel, int unit, bool decays = true, std::vector<std::string> partial = {},
                  DType dtype = DType::f64) {
  return BucketInput{name, numel, std::move(partial), decays, dtype, unit, "", 0, {}};
}

std::vector<std::string> names(const Bucket& b, const std::vector<BucketInput>& in) {
  std::vector<std::string> out;
  for (const BucketSlot& s : b.slots) out.push_back(in[s.param].name);
  return out;
}

}  // namespace

TEST_CASE("buckets follow backward order and hold one kind of parameter each", "[zero][plan]") {
  // Unit 0 (embedding), 1 (a block), 2 (head), as GptModel lists them.
  const std::vector<BucketInput> in = {param("wte", 100, 0), param("wpe", 30, 0),
                                       param("ln.w", 8, 1, false, {"tp.col"}), param("fc.w", 64, 1),
                                       param("fc.b", 8, 1, false), param("lnf.w", 8, 2, false, {"tp.col"})};
  BucketOptions o;
  o.dp = 2;
  const BucketPlan plan = plan_buckets(in, o);
  // Kinds: decayed weights; no decay with tp.col partial sums; no decay without.  Opened in backward order.
  REQUIRE(plan.buckets.size() == 3);
  CHECK(names(plan.buckets[0], in) == std::vector<std::string>{"lnf.w", "ln.w"});
  CHECK(plan.buckets[0].partial_groups == std::vector<std::string>{"tp.col"});
  CHECK_FALSE(plan.buckets[0].decays);
  CHECK(names(plan.buckets[1], in) == std::vector<std::string>{"fc.w", "wte", "wpe"});
  CHECK(plan.buckets[1].decays);
  CHECK(names(plan.buckets[2], in) == std::vector<std::string>{"fc.b"});
  CHECK(plan.buckets[1].units == std::vector<int>{1, 0});
  for (std::size_t i = 0; i < in.size(); ++i) {
    const BucketSlot& s = plan.buckets[plan.place[i].bucket].slots[plan.place[i].slot];
    CHECK(s.param == i);
    CHECK(s.numel == in[i].numel);
  }
}

TEST_CASE("parameters and shards start aligned; buckets pad to dp shards", "[zero][plan]") {
  const std::vector<BucketInput> in = {param("a", 5, 0), param("b", 3, 0), param("c", 17, 0)};
  for (int dp : {1, 2, 3, 4}) {
    BucketOptions o;
    o.dp = dp;
    o.align_bytes = 64;  // 8 doubles
    const BucketPlan plan = plan_buckets(in, o);
    REQUIRE(plan.buckets.size() == 1);
    const Bucket& b = plan.buckets[0];
    CHECK(b.slots[0].offset == 0);
    CHECK(b.slots[1].offset == 8);
    CHECK(b.slots[2].offset == 16);
    CHECK(b.used == 33);
    CHECK(b.padded % (8 * dp) == 0);
    CHECK(b.padded >= b.used);
    CHECK(b.padded - b.used < 8 * dp);
    CHECK(b.shard * dp == b.padded);
    CHECK(b.value_shard_bytes() % 64 == 0);
    CHECK(plan.padded_value_bytes() == b.padded * 8);
    CHECK(plan.value_shard_bytes() == b.shard * 8);
  }
  // f32: 16 elements per 64 bytes.
  BucketOptions o;
  o.dp = 3;
  const BucketPlan f32 = plan_buckets({param("a", 5, 0, true, {}, DType::f32), param("b", 3, 0, true, {}, DType::f32)}, o);
  CHECK(f32.buckets[0].slots[1].offset == 16);
  CHECK(f32.buckets[0].padded == 48);
  CHECK(f32.buckets[0].value_bytes() == 192);
}

TEST_CASE("the cap closes a bucket; a parameter over the cap is alone", "[zero][plan]") {
  const std::vector<BucketInput> in = {param("a", 10, 2), param("b", 10, 2), param("big", 1000, 1), param("c", 10, 1),
                                       param("d", 10, 0)};
  BucketOptions o;
  o.cap_bytes = 20 * 8;  // room for two aligned 10-element parameters? 10 → 16 aligned, 16 + 10 = 26 > 20
  const BucketPlan plan = plan_buckets(in, o);
  std::vector<std::vector<std::string>> got;
  for (const Bucket& b : plan.buckets) got.push_back(names(b, in));
  CHECK(got == std::vector<std::vector<std::string>>{{"a"}, {"b"}, {"big"}, {"c"}, {"d"}});
  o.cap_bytes = 26 * 8;
  got.clear();
  for (const Bucket& b : plan_buckets(in, o).buckets) got.push_back(names(b, in));
  CHECK(got == std::vector<std::vector<std::string>>{{"a", "b"}, {"big"}, {"c", "d"}});
}

TEST_CASE("unit-aligned buckets never span two units", "[zero][plan]") {
  const std::vector<BucketInput> in = {param("e", 10, 0), param("w1", 10, 1), param("w2", 10, 1), param("h", 10, 2)};
  BucketOptions o;
  o.unit_aligned = true;
  const BucketPlan plan = plan_buckets(in, o);
  REQUIRE(plan.buckets.size() == 3);
  for (const Bucket& b : plan.buckets) CHECK(b.units.size() == 1);
  CHECK(names(plan.buckets[1], in) == std::vector<std::string>{"w1", "w2"});
  o.unit_aligned = false;
  CHECK(plan_buckets(in, o).buckets.size() == 1);
}

TEST_CASE("the bucket plan refuses bad options naming the value", "[zero][plan][errors]") {
  const std::vector<BucketInput> in = {param("a", 10, 0)};
  BucketOptions o;
  o.dp = 0;
  CHECK_THROWS_WITH(plan_buckets(in, o), Catch::Contains("dp=0"));
  o = BucketOptions{};
  o.cap_bytes = 0;
  CHECK_THROWS_WITH(plan_buckets(in, o), Catch::Contains("cap_bytes=0"));
  o = BucketOptions{};
  o.align_bytes = 12;
  CHECK_THROWS_WITH(plan_buckets(in, o), Catch::Contains("align_bytes=12"));
  CHECK_THROWS_WITH(plan_buckets({param("empty", 0, 0)}, BucketOptions{}), Catch::Contains("empty has 0 elements"));
  CHECK_THROWS_WITH(bucket_cap_bytes(0.0), Catch::Contains("bucket_mb=0"));
  CHECK_THROWS_WITH(bucket_cap_bytes(-1.0), Catch::Contains("bucket_mb=-1"));
  CHECK_THROWS_WITH(bucket_cap_bytes(std::nan("")), Catch::Contains("bucket_mb=nan"));
  CHECK(bucket_cap_bytes(25.0) == 25 * 1048576);
}
