#pragma once
// TpGrid: the sub-mesh inside one tensor-parallel group, for a TP mode.  t is a rank's index in
// its TP group; the coordinate conventions are Colossal-AI's (docs/theory.md §2), and the TP layers
// rely on the group names and member orders below.
//
//   1d    t                       groups: tp
//   2d    t = r·q + c             tp.row (fixed r, varying c), tp.col (fixed c, varying r)
//   2.5d  t = c + q·r + q²·k      tp.row (varying c), tp.col (varying r), tp.dep (varying k),
//         (k = depth, d slabs)    planes tp.row-dep (fixed r), tp.col-dep (fixed c)
//   3d    t = i + q·j + q²·k      tp.input (varying i), tp.weight (varying j), tp.output (varying k),
//         (i input, j weight,     planes tp.input-weight (fixed k), tp.output-weight (fixed i)
//          k output)
//
//   2d, q = 3:        c→            2.5d, q = 2, d = 2:    k=0      k=1
//               r  0 1 2                                  0 1      4 5
//               ↓  3 4 5             (c→, r↓ per slab)     2 3      6 7
//                  6 7 8
//
// Every group lists its members in ascending t, so a rank's position in a group (its group rank)
// is its coordinate along the varying axis (in tp.row it is c); groups of a name are ordered by
// their lowest t.  With two varying axes the group rank is the mixed-radix index of the two, the
// faster axis (smaller stride) first.
#include <string>
#include <vector>

namespace mdtp {

enum class TpGridKind { d1, d2, d2p5, d3 };

const char* tp_grid_kind_name(TpGridKind kind);  // "1d", "2d", "2.5d", "3d"

// Coordinates of a TP rank.  Fields not used by the grid's kind are 0.
struct TpCoords {
  int r = 0;  // 2d, 2.5d: row
  int c = 0;  // 2d, 2.5d: column
  int k = 0;  // 2.5d: depth; 3d: output
  int i = 0;  // 3d: input
  int j = 0;  // 3d: weight
};

class TpGrid {
 public:
  // Validates the shape of tp for the kind (square for 2d, d·q² for 2.5d, cube for 3d); depth is
  // only for 2.5d and must be 1 otherwise.
  TpGrid(TpGridKind kind, int tp, int depth = 1);

  TpGridKind kind() const { return kind_; }
  int size() const { return tp_; }
  int q() const { return q_; }        // side of the grid (tp for 1d)
  int depth() const { return depth_; }

  struct Axis {
    std::string name;  // "r", "c", "k", "i", "j"
    int size;
    int stride;
  };
  // Axes, fastest-varying (stride 1) first; 1d has one axis "t".
  const std::vector<Axis>& axes() const { return axes_; }

  TpCoords coords(int t) const;
  int coord(int t, const std::string& axis) const;
  int rank_of(const TpCoords& coords) const;  // inverse of coords()

  // "tp" (the whole TP group) first, then the mode's sub-groups in the order of the table above.
  std::vector<std::string> group_names() const;
  // Axes varying inside the named group, in stride order.
  std::vector<std::string> varying_axes(const std::string& name) const;
  // Every group of that name, each a list of t in ascending order; they partition 0..tp-1.
  std::vector<std::vector<int>> local_groups(const std::string& name) const;

 private:
  int axis_index(const std::string& axis) const;
  TpGridKind kind_;
  int tp_;
  int q_;
  int depth_;
  std::vector<Axis> axes_;
  std::vector<std::pair<std::string, std::vector<std::string>>> groups_;  // name → varying axes
};

}  // namespace mdtp
