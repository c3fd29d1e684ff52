#include <catch2/catch.hpp>

#include "core/backend.hpp"
#include "core/tensor.hpp"

using namespace mdtp;

TEST_CASE("tensor shape, views and accounting", "[core]") {
  auto backend = make_host_backend();
  auto& tracker = backend->allocator().tracker();
  {
    Tensor t = backend->empty({3, 5, 7}, DType::f64, MemCategory::activations);
    CHECK(t.numel() == 105);
    CHECK(t.rows() == 15);
    CHECK(t.cols() == 7);
    CHECK(t.bytes() == 105 * 8);
    CHECK(tracker.current(MemCategory::activations) == 105 * 8);
    CHECK(tracker.current(MemCategory::parameters) == 0);

    Tensor p = backend->empty({10}, DType::f32, MemCategory::parameters);
    CHECK(tracker.current_total() == 105 * 8 + 40);
    CHECK(tracker.peak_total() == 105 * 8 + 40);

    std::vector<double> v(105);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i);
    backend->assign_f64(t, v);
    Tensor slice = t.row_slice(1, 3);  // rows 1..2 of dim 0 = elements 35..104
    CHECK(slice.shape() == Shape{2, 5, 7});
    CHECK(slice.data<double>()[0] == 35.0);
    CHECK(backend->to_f64(slice).back() == 104.0);
    Tensor flat = t.reshaped({15, 7});
    CHECK(flat.data<double>()[7] == 7.0);
    CHECK_THROWS_WITH(t.reshaped({4, 4}), Catch::Contains("cannot reshape [3, 5, 7] to [4, 4]"));
    CHECK_THROWS_WITH(t.data<float>(), Catch::Contains("holds f64 but was read as f32"));
    CHECK_THROWS_WITH(t.row_slice(2, 4), Catch::Contains("out of range for dimension 0 of size 3"));
  }
  // Views kept the storage alive until the end of the scope; everything is released now,
  // and the peak remembers the high-water mark of the sum.
  CHECK(tracker.current_total() == 0);
  CHECK(tracker.peak_total() == 105 * 8 + 40);
  tracker.reset_peaks();
  CHECK(tracker.peak_total() == 0);
}

TEST_CASE("dtype names parse and refuse", "[core]") {
  CHECK(parse_dtype("float64") == DType::f64);
  CHECK(parse_dtype("f32") == DType::f32);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK_THROWS_WITH(parse_dtype("f128"), Catch::Contains("unknown dtype 'f128'"));
}
