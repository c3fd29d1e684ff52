#pragma once
// "none": the serial reference.  Nothing is split; a Linear is one GEMM.  Every other mode is
// tested against this one (in float64).
#include "tp/mode.hpp"

namespace mdtp {

class SerialMode final : public TensorParallelMode {
 public:
  using TensorParallelMode::TensorParallelMode;
  TpMode kind() const override { return TpMode::none; }
  Layout residual_layout() const override { return Layout{"full", {}, {}}; }
  std::vector<std::string> tp_axes() const override { return {}; }
  std::unique_ptr<Linear> linear(const LinearSpec& spec, const Layout& input) const override;
};

}  // namespace mdtp
