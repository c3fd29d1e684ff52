#include "cost/geometry.hpp"

#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp::cost {

namespace {

// Mirrors make_tp_mode's check (modes/registry.cpp): a mode runs only on a mesh built for its grid.
// Returns the mesh, so the Topology member is built only from a configuration that passed.
const MeshConfig& checked_mesh(const Workload& w) {
  require(grid_kind(w.mode) == grid_kind(w.mesh.tp_mode), "tensor-parallel mode '", w.mode,
          "' needs a mesh built for the ", tp_grid_kind_name(grid_kind(w.mode)), " TP grid; this mesh was built for mode ",
          w.mesh.tp_mode);
  if (w.mode == TpMode::none)
    require(w.mesh.tp == 1, "mode 'none' is the serial reference and needs tp=1; got tp=", w.mesh.tp);
  return w.mesh;
}

void require_divides(std::int64_t value, std::int64_t divisor, const std::string& what, const std::string& why) {
  require(value > 0, what, " must be positive; got ", value);
  require(value % divisor == 0, what, "=", value, " must be divisible by ", divisor, " (", why, ")");
}

std::vector<std::string> group_list(const std::string& group) {
  return group.empty() ? std::vector<std::string>{} : std::vector<std::string>{group};
}

}  // namespace

const char* linear_kind_name(LinearKind kind) {
  switch (kind) {
    case LinearKind::serial: return "serial";
    case LinearKind::column_1d: return "1d-column";
    case LinearKind::row_1d: return "1d-row";
    case LinearKind::summa: return "summa";
    case LinearKind::cube_3d: return "3d";
  }
  return "?";
}

Geometry::Geometry(const Workload& workload) : workload_(workload), topology_(checked_mesh(workload)) {
  const Workload& w = workload_;
  const TpGrid& grid = topology_.tp_grid();
  tp_ = topology_.tp();
  q_ = w.mode == TpMode::none ? 1 : grid.q();
  depth_ = grid.depth();
  require(w.layer == "linear" || w.layer == "layernorm" || w.layer == "mlp" || w.layer == "attention",
          "unknown layer '", w.layer, "'; expected linear, layernorm, mlp or attention");
  require(w.rows > 0, "the workload needs rows = batch·sequence > 0; got rows=", w.rows);
  require(w.hidden > 0, "the workload needs hidden > 0; got hidden=", w.hidden);
  require(w.layer == "layernorm" || w.layer == "attention" || w.ffn_hidden > 0, "layer '", w.layer, "' needs ffn_hidden > 0; got ffn_hidden=",
          w.ffn_hidden);
  require(w.dtype == DType::f32 || w.dtype == DType::f64 || w.dtype == DType::bf16 || w.dtype == DType::f16,
          "unknown dtype code ", static_cast<int>(w.dtype));
  if (!w.data_parallel_group.empty()) group_size(w.data_parallel_group);  // an unknown name fails here

  require(w.block.fc1_factor >= 1 && w.block.qkv_features >= 0, "the block widths need fc1_factor >= 1 and "
          "qkv_features >= 0; got fc1_factor=", w.block.fc1_factor, " qkv_features=", w.block.qkv_features);
  if (w.layer == "linear") {
    linears_.push_back(make_linear("linear", w.hidden, w.ffn_hidden, 0));
  } else if (w.layer == "mlp") {
    // fc1 H → k·F (k = 2: a gated activation's gate|up fused into one Linear, tp/mlp.hpp), the
    // activation k·F → F on each rank's shard, fc2 F → H.
    linears_.push_back(make_linear("fc1", w.hidden, w.block.fc1_factor * w.ffn_hidden, 0));
    linears_.push_back(make_linear("fc2", w.ffn_hidden, w.hidden, 1));
  } else if (w.layer == "attention") {
    // Attention's two Linears (model/attention.hpp): c_attn H → Q|K|V (3H; grouped-query:
    // (heads + 2·kv)·d) as the first of a pair (1D column), c_proj H → H as the second (1D row;
    // 3D parity back to 0).  The attention core (and RoPE) between them communicates nothing.
    const std::int64_t qkv = w.block.qkv_features > 0 ? w.block.qkv_features : 3 * w.hidden;
    linears_.push_back(make_linear("c_attn", w.hidden, qkv, 0));
    linears_.push_back(make_linear("c_proj", w.hidden, w.hidden, 1));
  } else {
    layernorms_.push_back(make_layernorm(w.hidden));
  }
}

int Geometry::group_size(const std::string& group) const {
  return static_cast<int>(topology_.groups(group).front().size());
}

Extent Geometry::residual(std::int64_t cols) const {
  const TpMode mode = workload_.mode;
  std::int64_t row_blocks = 1, col_blocks = 1;
  std::string why;
  if (mode == TpMode::d1_sp) {
    row_blocks = tp_;
    why = "1d-sp splits the residual rows over tp";
  } else if (mode == TpMode::d2) {
    row_blocks = col_blocks = q_;
    why = "2D splits the activation q×q";
  } else if (mode == TpMode::d2p5) {
    row_blocks = static_cast<std::int64_t>(depth_) * q_;
    col_blocks = q_;
    why = "2.5D splits the activation rows d·q ways and its columns q ways";
  } else if (mode == TpMode::d3) {
    row_blocks = static_cast<std::int64_t>(q_) * q_;
    col_blocks = q_;
    why = "3D splits the activation rows q² ways and its columns q ways";
  }
  require_divides(workload_.rows, row_blocks, "rows B", why.empty() ? "rows" : why);
  require_divides(cols, col_blocks, "hidden", why.empty() ? "hidden" : why);
  return Extent{workload_.rows / row_blocks, cols / col_blocks};
}

// `position` is the Linear's index in the layer: in 1D it decides column (0) or row (1), in 3D
// the layout parity (the MLP's second Linear sees I and O swapped).
LinearShape Geometry::make_linear(const std::string& name, std::int64_t K, std::int64_t N, int position) const {
  const TpMode mode = workload_.mode;
  const std::int64_t B = workload_.rows;
  LinearShape s;
  s.name = name;
  s.in_features = K;
  s.out_features = N;
  s.full_rows = B;
  std::vector<std::string> weight_partial, bias_partial;
  const std::string who = name + " (" + std::to_string(K) + "→" + std::to_string(N) + ")";
  if (mode == TpMode::none) {
    s.kind = LinearKind::serial;
    s.x = {B, K};
    s.w = {K, N};
    s.y = {B, N};
    s.bias = N;
  } else if (is_megatron_1d(mode)) {
    const std::int64_t P = tp_;
    const bool sp = sequence_parallel();
    if (sp) require_divides(B, P, "rows B", "1d-sp splits the rows over tp=" + std::to_string(P));
    if (position == 0) {  // column-parallel: X as the residual, W split by columns
      s.kind = LinearKind::column_1d;
      require_divides(N, P, who + " out_features", "a column-parallel Linear splits W's columns over tp");
      s.x = {sp ? B / P : B, K};
      s.w = {K, N / P};
      s.y = {B, N / P};
      s.bias = N / P;
    } else {  // row-parallel: X split by columns, Y summed back to the residual layout
      s.kind = LinearKind::row_1d;
      require_divides(K, P, who + " in_features", "a row-parallel Linear splits W's rows over tp");
      s.x = {B, K / P};
      s.w = {K / P, N};
      s.y = {sp ? B / P : B, N};
      s.bias = N;
      if (sp) bias_partial = {group::tp};  // its output rows are split over tp
    }
  } else if (mode == TpMode::d2 || mode == TpMode::d2p5) {
    s.kind = LinearKind::summa;
    const std::int64_t q = q_, d = depth_;
    require_divides(B, d * q, "rows B", "the activation rows are split over tp.dep × tp.col");
    require_divides(K, q, who + " in_features", "SUMMA splits K over the grid");
    require_divides(N, q, who + " out_features", "SUMMA splits N over the grid");
    s.x = {B / (d * q), K / q};
    s.w = {K / q, N / q};
    s.y = {B / (d * q), N / q};
    s.bias = N / q;
    if (mode == TpMode::d2p5) {
      weight_partial = {"tp.dep"};
      bias_partial = {"tp.col-dep"};
    } else {
      bias_partial = {"tp.col"};
    }
  } else {  // 3d
    s.kind = LinearKind::cube_3d;
    const std::int64_t q = q_;
    require_divides(K, q * q, who + " in_features K", "3D splits W's rows over the output and weight axes");
    require_divides(N, q, who + " out_features N", "3D splits W's columns over the input axis");
    require_divides(B, q * q, "rows B", "3D splits the activation rows over the weight axis and one more");
    const bool parity1 = position % 2 == 1;
    s.input_group = parity1 ? "tp.output" : "tp.input";
    s.output_group = parity1 ? "tp.input" : "tp.output";
    s.x = {B / (q * q), K / q};
    s.w = {K / (q * q), N / q};
    s.y = {B / (q * q), N / q};
    s.bias = N / q;
    // Y's rows are split over (tp.weight, O): the bias gradient is partial over that plane.
    bias_partial = {parity1 ? "tp.input-weight" : "tp.output-weight"};
  }
  s.params.push_back(ParamShard{name + ".weight", s.w.numel(), weight_partial});
  if (workload_.block.linear_bias) s.params.push_back(ParamShard{name + ".bias", s.bias, bias_partial});
  else s.bias = 0;
  return s;
}

LayerNormShape Geometry::make_layernorm(std::int64_t hidden) const {
  const TpMode mode = workload_.mode;
  LayerNormShape s;
  s.x = residual(hidden);
  std::string partial;
  if (mode == TpMode::d1_sp) {
    partial = group::tp;
  } else if (mode == TpMode::d2) {
    s.hidden_group = "tp.row";
    partial = "tp.col";
  } else if (mode == TpMode::d2p5) {
    s.hidden_group = "tp.row";
    partial = "tp.col-dep";
  } else if (mode == TpMode::d3) {
    s.hidden_group = "tp.output";  // the residual's parity 0: columns over tp.output
    partial = "tp.input-weight";
  }
  s.params.push_back(ParamShard{"ln.weight", s.x.cols, group_list(partial)});
  if (workload_.block.norm_shift) s.params.push_back(ParamShard{"ln.bias", s.x.cols, group_list(partial)});
  return s;
}

std::vector<ParamShard> Geometry::params() const {
  std::vector<ParamShard> out;
  for (const auto& l : linears_) out.insert(out.end(), l.params.begin(), l.params.end());
  for (const auto& n : layernorms_) out.insert(out.end(), n.params.begin(), n.params.end());
  return out;
}

std::int64_t copied_kv_elements(const Geometry& attention, std::int64_t head_dim) {
  if (attention.workload().mesh.kv_copies <= 1) return 0;
  const LinearShape& qkv = attention.linears().front();
  return qkv.params.front().elements / qkv.y.cols * 2 * head_dim;
}

}  // namespace mdtp::cost
