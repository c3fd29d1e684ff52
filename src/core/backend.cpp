#include "core/backend.hpp"

namespace mdtp {

Tensor Backend::empty(const Shape& shape, DType dtype, MemCategory category) const {
  return Tensor::empty(shape, dtype, allocator_, category);
}

Tensor Backend::zeros(const Shape& shape, DType dtype, MemCategory category) const {
  Tensor t = empty(shape, dtype, category);
  fill(t, 0.0);
  return t;
}

Tensor Backend::from_f64(const std::vector<double>& values, const Shape& shape, DType dtype,
                         MemCategory category) const {
  require(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "from_f64: ",
          values.size(), " values for shape ", shape_string(shape));
  Tensor t = empty(shape, dtype, category);
  assign_f64(t, values);
  return t;
}

Tensor Backend::clone(const Tensor& src, MemCategory category) const {
  Tensor t = empty(src.shape(), src.dtype(), category);
  copy(src, t);
  return t;
}

}  // namespace mdtp
