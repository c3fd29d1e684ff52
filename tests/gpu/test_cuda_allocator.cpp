// The device allocator: per-category accounting exactly as on the host (requested bytes), and
// the caching pool's reuse and release.
#include <catch2/catch.hpp>

#include "cuda/cuda_allocator.hpp"
#include "cuda/cuda_backend.hpp"

using namespace mdtp;

TEST_CASE("CUDA allocator: size classes", "[gpu][allocator]") {
  CHECK(CudaAllocator::size_class(0) == 512);
  CHECK(CudaAllocator::size_class(1) == 512);
  CHECK(CudaAllocator::size_class(513) == 1024);
  CHECK(CudaAllocator::size_class(std::size_t{1} << 20) == (std::size_t{1} << 20));
  CHECK(CudaAllocator::size_class((std::size_t{1} << 20) + 1) == (std::size_t{5} << 18));
  CHECK(CudaAllocator::size_class(std::size_t{1} << 30) == (std::size_t{1} << 30));
  for (std::size_t bytes : {std::size_t{3000}, std::size_t{3} << 20, (std::size_t{7} << 24) + 5}) {
    std::size_t c = CudaAllocator::size_class(bytes);
    CHECK(c >= bytes);
    CHECK(static_cast<double>(c) <= 1.25 * static_cast<double>(bytes) + 512);
  }
}

TEST_CASE("CUDA allocator: accounting per category and pool reuse", "[gpu][allocator]") {
  auto backend = make_cuda_backend();
  CudaAllocator& pool = backend->cuda_allocator();
  MemoryTracker& tracker = backend->allocator().tracker();
  CHECK(backend->allocator().device() == DeviceKind::cuda);
  const auto base_total = tracker.current_total();
  void* first = nullptr;
  {
    Tensor p = backend->empty({1000, 3}, DType::f32, MemCategory::parameters);
    Tensor g = backend->empty({1000, 3}, DType::bf16, MemCategory::gradients);
    Tensor a = backend->empty({17}, DType::f64, MemCategory::activations);
    first = p.raw_data();
    CHECK(tracker.current(MemCategory::parameters) == 12000);
    CHECK(tracker.current(MemCategory::gradients) == 6000);
    CHECK(tracker.current(MemCategory::activations) == 17 * 8);
    CHECK(tracker.current_total() == base_total + 12000 + 6000 + 136);
    CHECK(pool.pool_stats().reserved_bytes >= 12000 + 6000 + 136);
  }
  CHECK(tracker.current(MemCategory::parameters) == 0);
  CHECK(tracker.current(MemCategory::gradients) == 0);
  CHECK(tracker.peak(MemCategory::parameters) == 12000);
  CHECK(tracker.current_total() == base_total);

  const CudaPoolStats before = pool.pool_stats();
  CHECK(before.cached_bytes > 0);
  {
    // Same size class, another category: the cached block comes back, no cudaMalloc.
    Tensor again = backend->empty({3000}, DType::f32, MemCategory::optimizer_state);
    CHECK(again.raw_data() == first);
    CHECK(tracker.current(MemCategory::optimizer_state) == 12000);
    const CudaPoolStats after = pool.pool_stats();
    CHECK(after.cuda_mallocs == before.cuda_mallocs);
    CHECK(after.reuses == before.reuses + 1);
  }
  pool.release_cached();
  const CudaPoolStats released = pool.pool_stats();
  CHECK(released.cached_bytes == 0);
  CHECK(released.reserved_bytes == 0);
  CHECK(tracker.current_total() == base_total);
}

TEST_CASE("CUDA allocator: device tensors are plain device memory", "[gpu][allocator]") {
  auto backend = make_cuda_backend();
  Tensor t = backend->zeros({64}, DType::f32, MemCategory::other);
  cudaPointerAttributes attributes{};
  REQUIRE(cudaPointerGetAttributes(&attributes, t.raw_data()) == cudaSuccess);
  CHECK(attributes.type == cudaMemoryTypeDevice);  // not managed, not host
  CHECK(attributes.device == backend->device_index());
}
