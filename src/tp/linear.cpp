#include "tp/linear.hpp"

#include <algorithm>

#include "mesh/mesh.hpp"

namespace mdtp {

std::string complement_group(const std::vector<std::string>& all, const std::vector<std::string>& used) {
  std::vector<std::string> rest;
  for (const auto& g : all)
    if (std::find(used.begin(), used.end(), g) == used.end()) rest.push_back(g);
  return spanning_group(rest);
}

namespace {
std::vector<std::string> as_list(const std::string& group) {
  return group.empty() ? std::vector<std::string>{} : std::vector<std::string>{group};
}
}  // namespace

LinearBase::LinearBase(const TpContext& ctx, LinearSpec spec, Layout input_layout, Layout output_layout,
                       Layout weight_layout, const std::vector<std::string>& tp_axes,
                       std::vector<std::string> weight_partial_over)
    : ctx_(ctx), spec_(std::move(spec)), input_layout_(std::move(input_layout)),
      output_layout_(std::move(output_layout)) {
  require(spec_.in_features > 0 && spec_.out_features > 0, spec_.name, ": features must be positive; got in=",
          spec_.in_features, " out=", spec_.out_features);
  std::vector<std::string> weight_axes = weight_layout.row_groups;
  weight_axes.insert(weight_axes.end(), weight_layout.col_groups.begin(), weight_layout.col_groups.end());
  weight_.name = spec_.name + ".weight";
  weight_.full_shape = {spec_.in_features, spec_.out_features};
  weight_.layout = std::move(weight_layout);
  weight_.replicated_over = as_list(complement_group(tp_axes, weight_axes));
  weight_.partial_grad_over = std::move(weight_partial_over);
  weight_.decays = true;
  if (spec_.draw_initial_values)
    materialize(weight_, ctx_, spec_.weight_init);
  else
    allocate_zeroed(weight_, ctx_);
  if (spec_.bias) {
    bias_.name = spec_.name + ".bias";
    bias_.full_shape = {spec_.out_features};
    bias_.layout = Layout{output_layout_.name + ".bias", {}, output_layout_.col_groups};
    bias_.replicated_over = as_list(complement_group(tp_axes, output_layout_.col_groups));
    bias_.partial_grad_over = as_list(spanning_group(output_layout_.row_groups));
    if (spec_.draw_initial_values)
      materialize(bias_, ctx_, spec_.bias_init);
    else
      allocate_zeroed(bias_, ctx_);
  }
  expected_in_cols_ = shard_block(input_layout_, ctx_.mesh, full_rows(input_layout_, ctx_.mesh, 1),
                                  spec_.in_features, spec_.name + " input").cols;
  expected_out_cols_ = shard_block(output_layout_, ctx_.mesh, full_rows(output_layout_, ctx_.mesh, 1),
                                   spec_.out_features, spec_.name + " output").cols;
}

LinearActivationAllocs LinearBase::activation_allocs(std::int64_t) const { return {}; }

Tensor Linear::backward(const Tensor& dy, LinearSaved& saved) {
  Tensor dx = backward_input(dy, saved);
  backward_weight(saved);
  return dx;
}

Tensor LinearBase::forward(const Tensor& x, LinearSaved& saved) {
  require(saved.stage == LinearSaved::Stage::empty, spec_.name,
          ": forward was given the saved state of a micro-batch still in flight; use one LinearSaved per micro-batch");
  require(x.ndim() == 2 && x.cols() == expected_in_cols_, spec_.name, ": input shard has shape ",
          shape_string(x.shape()), "; expected [rows, ", expected_in_cols_, "] in layout ", input_layout_.name);
  saved.rows = x.rows();
  Tensor y = matmul_forward(x, saved);
  if (spec_.bias) ctx_.backend.add_row_vector(y, bias_.value);
  saved.stage = LinearSaved::Stage::forward_done;
  return y;
}

Tensor LinearBase::backward_input(const Tensor& dy, LinearSaved& saved) {
  require(saved.stage == LinearSaved::Stage::forward_done, spec_.name,
          saved.stage == LinearSaved::Stage::empty ? ": backward_input called before forward"
                                                    : ": backward_input called twice for one micro-batch");
  require(dy.ndim() == 2 && dy.cols() == expected_out_cols_, spec_.name, ": output-gradient shard has shape ",
          shape_string(dy.shape()), "; expected [rows, ", expected_out_cols_, "] in layout ", output_layout_.name);
  saved.dy = dy;
  Tensor dx = input_gradient(dy, saved);
  saved.stage = LinearSaved::Stage::input_done;
  return dx;
}

void LinearBase::backward_weight(LinearSaved& saved) {
  require(saved.stage == LinearSaved::Stage::input_done, spec_.name,
          ": backward_weight needs backward_input of the same micro-batch first");
  if (spec_.bias) ctx_.backend.column_sums(saved.dy, bias_.grad, 1.0);
  weight_gradient(saved);
  saved = LinearSaved{};  // what forward kept is no longer needed: free it now
}

std::vector<Parameter*> LinearBase::parameters() {
  std::vector<Parameter*> ps{&weight_};
  if (spec_.bias) ps.push_back(&bias_);
  return ps;
}

}  // namespace mdtp
