#pragma once
// The shipped DGX A100 preset (data/clusters/dgx-a100.json), loaded once per test binary: the
// cluster the step-model tests price on.
#include "cost/cluster.hpp"

namespace mdtp::testing {

inline const cost::Cluster& dgx_a100() {
  static const cost::Cluster c = cost::load_cluster(cost::find_cluster("dgx-a100"));
  return c;
}

}  // namespace mdtp::testing
