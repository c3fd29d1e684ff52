#include "cost/calibration.hpp"

#include "core/error.hpp"

namespace mdtp::cost {

const CalibrationFit* Calibration::find(CollectiveOp op, LinkClass link, int group_size, std::int64_t bytes) const {
  const CalibrationFit* any_size = nullptr;
  for (const auto& fit : fits) {
    if (fit.op != op || fit.link != link || bytes < fit.min_bytes || bytes >= fit.max_bytes) continue;
    if (fit.group_size == group_size) return &fit;
    if (fit.group_size == 0 && any_size == nullptr) any_size = &fit;
  }
  return any_size;
}

CollectiveOp parse_collective_op(const std::string& name) {
  for (CollectiveOp op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                          CollectiveOp::broadcast, CollectiveOp::reduce, CollectiveOp::send, CollectiveOp::recv,
                          CollectiveOp::barrier})
    if (name == collective_name(op)) return op;
  throw_error("unknown collective op '", name,
              "'; expected all_reduce, all_gather, reduce_scatter, broadcast, reduce, send, recv or barrier");
}

LinkClass parse_link_class(const std::string& name) {
  if (name == link_class_name(LinkClass::intra_node)) return LinkClass::intra_node;
  if (name == link_class_name(LinkClass::inter_node)) return LinkClass::inter_node;
  throw_error("unknown link class '", name, "'; expected intra-node or inter-node");
}

}  // namespace mdtp::cost
