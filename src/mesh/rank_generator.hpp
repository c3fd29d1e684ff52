#pragma once
// RankGenerator: the rank groups of a tp·cp·dp·pp mesh, reproducing Megatron-LM's RankGenerator
// (docs/theory.md §1) so that an mdtp layout and a Megatron layout of the same sizes and order
// place every rank identically.
//
// The order string lists the axes fastest-varying first ("tp-cp-dp-pp": neighbouring ranks share
// a TP group).  Axis a has stride prod(size of the axes before it).  A token such as "tp-pp" masks
// some axes; ranks that agree on every unmasked axis form one group.  Following Megatron:
//   - members of a group are ordered by the mixed-radix index of their masked coordinates
//     (masked axes in the order string's order, the first one fastest),
//   - groups are ordered by the mixed-radix index of their unmasked coordinates (same rule),
//     which is also ascending order of each group's lowest rank.
// Axes of size 1 missing from the order are appended (as Megatron does), so "tp-dp-pp" gives the
// same groups as "tp-cp-dp-pp" when cp = 1.
#include <string>
#include <vector>

namespace mdtp {

class RankGenerator {
 public:
  RankGenerator(int tp, int cp, int dp, int pp, const std::string& order = "tp-cp-dp-pp");

  int world() const { return world_; }
  // The effective order, with any appended size-1 axes: e.g. "tp-dp-pp-cp".
  std::string order() const;
  const std::vector<std::string>& axes() const { return axes_; }   // effective order, split
  const std::vector<int>& sizes() const { return sizes_; }         // per axis of axes()
  int size_of(const std::string& axis) const;

  // Coordinate of `rank` along `axis` ("tp", "cp", "dp" or "pp").
  int coord(int rank, const std::string& axis) const;

  // Groups for a token like "tp", "dp-cp" or "pp-tp": axes joined by '-', in any order, no
  // repeats.  An unknown or repeated axis is an mdtp::Error naming it.
  std::vector<std::vector<int>> groups(const std::string& token) const;

  // The axes named by a token, validated, in the order string's order ("pp-tp" -> {tp, pp}).
  std::vector<std::string> token_axes(const std::string& token) const;

 private:
  int axis_index(const std::string& axis, const std::string& context) const;
  std::vector<std::string> axes_;
  std::vector<int> sizes_;
  std::vector<int> strides_;
  int world_ = 1;
};

// Splits "tp-dp" into {"tp", "dp"}; an empty part (as in "tp--dp") is kept as "" so that the
// caller reports it.
std::vector<std::string> split_token(const std::string& token);

}  // namespace mdtp
