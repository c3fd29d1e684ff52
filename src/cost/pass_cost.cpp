#include "cost/pass_cost.hpp"

namespace mdtp::cost {

PassCost& PassCost::operator+=(const PassCost& o) {
  gemm_flops += o.gemm_flops;
  gemm_seconds += o.gemm_seconds;
  stream_bytes += o.stream_bytes;
  stream_seconds += o.stream_seconds;
  comm_bytes += o.comm_bytes;
  comm_seconds += o.comm_seconds;
  comm_on_sms_seconds += o.comm_on_sms_seconds;
  return *this;
}

PassCost PassCost::scaled(double f) const {
  PassCost p = *this;
  p.gemm_flops *= f;
  p.gemm_seconds *= f;
  p.stream_bytes *= f;
  p.stream_seconds *= f;
  p.comm_bytes *= f;
  p.comm_seconds *= f;
  p.comm_on_sms_seconds *= f;
  return p;
}

}  // namespace mdtp::cost
