#include "plan/gradient_rounds.hpp"

#include <algorithm>
#include <utility>

namespace mdtp {

GradientRounds::GradientRounds(std::vector<std::vector<int>> writers)
    : writers_(std::move(writers)), reports_(writers_.size()), rounds_(writers_.size(), 0) {
  reset();
}

void GradientRounds::reset() {
  for (std::size_t b = 0; b < writers_.size(); ++b) reports_[b].assign(writers_[b].size(), 0);
  std::fill(rounds_.begin(), rounds_.end(), 0);
}

std::vector<std::size_t> GradientRounds::report(int unit) {
  std::vector<std::size_t> now;
  for (std::size_t b = 0; b < writers_.size(); ++b) {
    const auto it = std::find(writers_[b].begin(), writers_[b].end(), unit);
    if (it == writers_[b].end()) continue;
    std::vector<int>& counts = reports_[b];
    ++counts[static_cast<std::size_t>(it - writers_[b].begin())];
    if (*std::min_element(counts.begin(), counts.end()) > rounds_[b]) {
      ++rounds_[b];
      now.push_back(b);
    }
  }
  return now;
}

bool GradientRounds::writes(int unit, std::size_t b) const {
  const std::vector<int>& w = writers_.at(b);
  return std::find(w.begin(), w.end(), unit) != w.end();
}

}  // namespace mdtp
