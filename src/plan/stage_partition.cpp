#include "plan/stage_partition.hpp"

#include <numeric>
#include <sstream>

#include "core/error.hpp"

namespace mdtp {

StagePartition::StagePartition(int n_layer, int stages, int chunks, std::vector<int> blocks, StageMapping mapping)
    : n_layer_(n_layer), map_(mapping, stages, chunks), blocks_(std::move(blocks)) {
  require(n_layer >= 1, "a pipeline needs at least one block; got n_layer=", n_layer);
  const int n = positions();
  // DualPipe's stages hold two positions each (r and p − 1 − r): the model is cut into pp parts.
  const bool mirrored = mapping == StageMapping::mirrored;
  const std::string parts = mirrored ? "pp=" + std::to_string(stages) + " (dualpipe: stage r holds positions r and p-1-r)"
                                     : "pp=" + std::to_string(stages) + " × chunks=" + std::to_string(chunks);
  if (blocks_.empty()) {
    require(n_layer % n == 0, "the ", n_layer, " layers do not split evenly over ", parts,
            mirrored ? "" : " = " + std::to_string(n) + " virtual stages", "; give the split with --pp-layers (", n,
            " counts summing to ", n_layer, ")");
    blocks_.assign(static_cast<std::size_t>(n), n_layer / n);
  }
  require(static_cast<int>(blocks_.size()) == n, "the layer split has ", blocks_.size(), " entries; ", parts, " needs ",
          n);
  for (int k = 0; k < n; ++k) {
    const int b = blocks_[static_cast<std::size_t>(k)];
    require(b >= 0, "the layer split gives virtual stage ", k, " ", b, " layers; counts must be >= 0");
    require(b > 0 || k == 0 || k == n - 1, "the layer split gives virtual stage ", k,
            " no layer; only the first (embedding) and the last (head) virtual stage may hold none");
  }
  const int total = std::accumulate(blocks_.begin(), blocks_.end(), 0);
  require(total == n_layer, "the layer split sums to ", total, " layers; the model has ", n_layer,
          " (a split must neither drop nor repeat a layer)");
  first_block_.assign(static_cast<std::size_t>(n), 0);
  for (int k = 1; k < n; ++k)
    first_block_[static_cast<std::size_t>(k)] = first_block_[static_cast<std::size_t>(k - 1)] + blocks_[static_cast<std::size_t>(k - 1)];
}

StagePartition stage_partition(const RunSpec& spec) {
  const ParallelLayout& l = spec.layout;
  return StagePartition(static_cast<int>(spec.model.layers), l.pp, l.chunks, l.pp_layers, l.stage_mapping);
}

UnitSpan StagePartition::position_units(int k) const {
  require(k >= 0 && k < positions(), "position ", k, " is outside [0, ", positions(), ")");
  const int first_block = first_block_[static_cast<std::size_t>(k)], count = blocks_[static_cast<std::size_t>(k)];
  // Block b is unit b + 1; the embedding (unit 0) and the head (unit L + 1) join the ends.
  const int first = k == 0 ? 0 : first_block + 1;
  const int last = k == positions() - 1 ? n_layer_ + 1 : first_block + count;
  return UnitSpan{first, last};
}

UnitSpan StagePartition::units(int vs) const { return position_units(map_.position(vs)); }

std::vector<UnitSpan> StagePartition::stage_units(int stage) const {
  require(stage >= 0 && stage < stages(), "stage ", stage, " is outside [0, ", stages(), ")");
  std::vector<UnitSpan> out;
  for (int c = 0; c < chunks(); ++c) out.push_back(units(virtual_stage(stage, c)));
  return out;
}

std::string StagePartition::describe() const {
  std::ostringstream os;
  for (int k = 0; k < positions(); ++k) {
    const UnitSpan u = position_units(k);
    os << (k ? " " : "") << "[" << u.first << "-" << u.last << "]";
  }
  return os.str();
}

std::vector<int> parse_layer_split(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    std::size_t used = 0;
    int value = -1;
    try {
      value = std::stoi(item, &used);
    } catch (...) {
      used = 0;
    }
    require(used == item.size() && !item.empty() && value >= 0, "the layer split '", text,
            "' needs comma-separated whole numbers >= 0 (e.g. 3,5,5,3); '", item, "' is not one");
    out.push_back(value);
  }
  require(!out.empty(), "the layer split '", text, "' is empty");
  return out;
}

}  // namespace mdtp
