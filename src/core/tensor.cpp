#include "core/tensor.hpp"

#include <sstream>

namespace mdtp {

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto extent : shape) n *= extent;
  return n;
}

Storage::Storage(std::shared_ptr<Allocator> allocator, std::size_t bytes, MemCategory category)
    : allocator_(std::move(allocator)),
      data_(nullptr),
      bytes_(bytes),
      category_(category),
      holds_values_(allocator_->holds_values(category)) {
  data_ = allocator_->allocate(bytes_, category_);
}

Storage::~Storage() { allocator_->release(data_, bytes_, category_); }

Tensor Tensor::empty(const Shape& shape, DType dtype, std::shared_ptr<Allocator> allocator,
                     MemCategory category) {
  for (auto extent : shape) require(extent >= 0, "negative extent in shape ", shape_string(shape));
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.storage_ = std::make_shared<Storage>(std::move(allocator),
                                         static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype),
                                         category);
  return t;
}

std::int64_t Tensor::dim(int axis) const {
  int n = ndim();
  int a = axis < 0 ? axis + n : axis;
  require(a >= 0 && a < n, "axis ", axis, " out of range for shape ", shape_string(shape_));
  return shape_[static_cast<std::size_t>(a)];
}

std::int64_t Tensor::rows() const {
  if (shape_.empty()) return 1;
  std::int64_t r = 1;
  for (std::size_t i = 0; i + 1 < shape_.size(); ++i) r *= shape_[i];
  return r;
}

std::int64_t Tensor::cols() const { return shape_.empty() ? 1 : shape_.back(); }

void* Tensor::raw_data() const {
  require(defined(), "raw_data() of an undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_;
}

Tensor Tensor::row_slice(std::int64_t begin, std::int64_t end) const {
  require(ndim() >= 1, "row_slice of a 0-d tensor");
  require(0 <= begin && begin <= end && end <= shape_[0], "row_slice [", begin, ", ", end,
          ") out of range for dimension 0 of size ", shape_[0]);
  Tensor t = *this;
  t.shape_[0] = end - begin;
  std::int64_t row_elems = shape_[0] == 0 ? 0 : numel() / shape_[0];
  t.offset_ = offset_ + static_cast<std::size_t>(begin * row_elems) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  require(shape_numel(shape) == numel(), "cannot reshape ", shape_string(shape_), " to ",
          shape_string(shape));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

void require_shape(const Tensor& tensor, const Shape& expected, const char* what) {
  require(tensor.defined(), what, " is undefined; expected shape ", shape_string(expected));
  require(tensor.shape() == expected, what, " has shape ", shape_string(tensor.shape()),
          "; expected ", shape_string(expected));
}

}  // namespace mdtp
