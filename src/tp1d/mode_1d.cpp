#include "tp1d/mode_1d.hpp"

#include "tp1d/column_linear.hpp"
#include "tp1d/row_linear.hpp"

namespace mdtp {

std::unique_ptr<Linear> Mode1D::linear(const LinearSpec& spec, const Layout& input) const {
  if (input == residual_layout()) return std::make_unique<ColumnParallelLinear>(ctx_, spec, sequence_parallel_);
  if (input == hidden_layout()) return std::make_unique<RowParallelLinear>(ctx_, spec, sequence_parallel_);
  throw_error(spec.name, ": mode ", name(), " builds a column-parallel Linear from layout ", residual_layout().name,
              " or a row-parallel one from ", hidden_layout().name, "; got ", input.name);
}

}  // namespace mdtp
