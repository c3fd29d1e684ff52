#pragma once
// A Tensor is a shape, an element type, a device and a reference-counted, accounted storage.
// Storage is contiguous row-major; a tensor may be a view of a contiguous range of rows of
// another (row_slice), which is what dim-0 collectives and micro-batching need.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"

namespace mdtp {

using Shape = std::vector<std::int64_t>;
std::string shape_string(const Shape& shape);  // "[4, 6]"
std::int64_t shape_numel(const Shape& shape);

class Storage {
 public:
  Storage(std::shared_ptr<Allocator> allocator, std::size_t bytes, MemCategory category);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  DeviceKind device() const { return allocator_->device(); }
  bool holds_values() const { return holds_values_; }

 private:
  std::shared_ptr<Allocator> allocator_;
  void* data_;
  std::size_t bytes_;
  MemCategory category_;
  bool holds_values_;
};

class Tensor {
 public:
  Tensor() = default;  // undefined: defined() is false
  static Tensor empty(const Shape& shape, DType dtype, std::shared_ptr<Allocator> allocator,
                      MemCategory category);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(int axis) const;  // negative axes count from the end
  int ndim() const { return static_cast<int>(shape_.size()); }
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  DeviceKind device() const { return storage_ ? storage_->device() : DeviceKind::host; }
  MemCategory category() const { return storage_ ? storage_->category() : MemCategory::other; }
  // False for a synthetic tensor (Allocator::holds_values): its kernels are not run, its bytes
  // still move and are accounted.
  bool holds_values() const { return storage_ ? storage_->holds_values() : true; }

  // A 2-D view of the data: all leading dimensions folded into rows.
  std::int64_t rows() const;
  std::int64_t cols() const;

  void* raw_data() const;
  template <class T>
  T* data() const {
    require(defined(), "data() of an undefined tensor");
    require(dtype_ == dtype_of<T>(), "tensor holds ", dtype_name(dtype_), " but was read as ",
            dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw_data());
  }

  // View of rows [begin, end) of dimension 0 (shares storage).
  Tensor row_slice(std::int64_t begin, std::int64_t end) const;
  // Same storage, another shape with the same element count.
  Tensor reshaped(const Shape& shape) const;
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_ && offset_ == other.offset_; }

 private:
  Shape shape_;
  DType dtype_ = DType::f32;
  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;  // bytes from the start of storage
};

// Throws a clear Error unless the two shapes are equal.
void require_shape(const Tensor& tensor, const Shape& expected, const char* what);

}  // namespace mdtp
