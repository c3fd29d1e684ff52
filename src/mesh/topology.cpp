#include "mesh/topology.hpp"


#include <algorithm>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "spec/names.hpp"

namespace mdtp {

namespace {

// Checks what the members' constructors cannot: the world and its divisibility.  Runs first
// (it initialises config_), so a bad world is reported before anything derived from it.
MeshConfig validated(const MeshConfig& c) {
  require(c.world >= 1, "mesh world size must be >= 1; got world=", c.world);
  const std::pair<const char*, int> sizes[] = {{"tp", c.tp}, {"pp", c.pp}, {"cp", c.cp}};
  for (const auto& [name, size] : sizes)
    require(size >= 1, "mesh axis sizes must be >= 1; got ", name, "=", size);
  long long product = 1LL * c.tp * c.pp * c.cp;
  require(c.world % product == 0, "world=", c.world, " is not divisible by tp*pp*cp=", product, " (tp=", c.tp,
          ", pp=", c.pp, ", cp=", c.cp, ")");
  require(c.ranks_per_node >= 0, "ranks_per_node must be >= 0 (0 = one node); got ranks_per_node=",
          c.ranks_per_node);
  require(c.tp_mode != TpMode::none || c.tp == 1, "tensor-parallel mode 'none' is the serial reference and needs tp=1; got tp=",
          c.tp);
  require(c.kv_copies >= 1, "kv_copies must be >= 1; got ", c.kv_copies);
  return c;
}

// Writes `value` with each object that holds arrays or objects one member per line, and
// everything else (sizes, group lists) on one line: a mesh of many ranks stays one line per group
// kind.
void write_json(std::ostream& os, const nlohmann::ordered_json& value, int indent = 0) {
  constexpr auto kReplace = nlohmann::ordered_json::error_handler_t::replace;
  const bool nested = value.is_object() && std::any_of(value.begin(), value.end(), [](const auto& member) {
                        return member.is_structured();
                      });
  if (!nested) {
    os << value.dump(-1, ' ', false, kReplace);
    return;
  }
  const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
  os << "{";
  bool first = true;
  for (const auto& [key, member] : value.items()) {
    os << (first ? "\n" : ",\n") << pad << nlohmann::ordered_json(key).dump(-1, ' ', false, kReplace) << ": ";
    write_json(os, member, indent + 2);
    first = false;
  }
  os << "\n" << std::string(static_cast<std::size_t>(indent), ' ') << "}";
}

}  // namespace

const char* link_class_name(LinkClass link) {
  return link == LinkClass::intra_node ? "intra-node" : "inter-node";
}

const std::vector<std::string>& Topology::mesh_tokens() {
  static const std::vector<std::string> tokens = {group::tp,    group::pp,    group::dp,    group::cp,
                                                  group::tp_pp, group::tp_dp, group::dp_cp, group::tp_dp_cp};
  return tokens;
}

int head_split_ranks(TpMode mode, int tp, int depth) {
  return TpGrid(grid_kind(mode), tp, depth).axes().front().size;
}

int kv_copies_for(std::int64_t kv_heads, int head_split) {
  if (kv_heads <= 0 || kv_heads >= head_split || head_split % kv_heads != 0) return 1;
  return static_cast<int>(head_split / kv_heads);
}

MeshConfig mesh_config(const ParallelLayout& layout, int world, std::int64_t kv_heads) {
  MeshConfig m;
  m.world = world;
  m.tp = layout.tp;
  m.pp = layout.pp;
  m.tp_mode = layout.mode;
  m.tp_depth = layout.depth;
  m.stage_mapping = layout.stage_mapping;
  // A layout the grid refuses is reported by Topology, with its own message.
  if (kv_heads > 0) {
    try {
      m.kv_copies = kv_copies_for(kv_heads, head_split_ranks(layout.mode, layout.tp, layout.depth));
    } catch (const Error&) {
      m.kv_copies = 1;
    }
  }
  return m;
}

Topology::Topology(const MeshConfig& config)
    : config_(validated(config)),
      dp_(config_.world / (config_.tp * config_.pp * config_.cp)),
      generator_(config_.tp, config_.cp, dp_, config_.pp, config_.order),
      grid_(grid_kind(config_.tp_mode), config_.tp, config_.tp_depth) {
  std::vector<int> all(config_.world);
  for (int r = 0; r < config_.world; ++r) all[r] = r;
  groups_[group::world] = {all};

  // Every non-empty set of axes, stored under its canonical name, so that groups("cp-pp") works
  // as well as the eight named tokens.
  const std::vector<std::string> axes = {"tp", "dp", "cp", "pp"};
  for (unsigned mask = 1; mask < 16; ++mask) {
    std::string token;
    for (unsigned a = 0; a < 4; ++a)
      if (mask & (1u << a)) token += (token.empty() ? "" : "-") + axes[a];
    groups_[token] = generator_.groups(token);
  }

  auto& embedding = groups_[group::embedding];
  for (const auto& stages : groups_.at(group::pp)) {
    if (stages.size() > 1 && config_.stage_mapping == StageMapping::round_robin) {
      embedding.push_back({stages.front(), stages.back()});
    } else {
      // One stage holds both ends (a V), or each end stage holds both (a mirror): one wte each.
      embedding.push_back({stages.front()});
      if (stages.size() > 1 && config_.stage_mapping == StageMapping::mirrored) embedding.push_back({stages.back()});
    }
  }
  // DualPipe: stage r with its mirror p − 1 − r (a pp of even size; the schedule refuses others).
  if (config_.stage_mapping == StageMapping::mirrored) {
    auto& mirror = groups_[group::mirror];
    for (const auto& stages : groups_.at(group::pp)) {
      const std::size_t p = stages.size();
      require(p % 2 == 0, "a mirrored stage mapping needs an even pp; got pp=", p);
      for (std::size_t r = 0; r < p / 2; ++r) mirror.push_back({stages[r], stages[p - 1 - r]});
    }
  }

  for (const auto& name : grid_.group_names()) {
    if (name == group::tp) continue;
    auto local = grid_.local_groups(name);
    auto& global = groups_[name];
    for (const auto& tp_group : groups_.at(group::tp))
      for (const auto& sub : local) {
        std::vector<int> ranks;
        for (int t : sub) ranks.push_back(tp_group[t]);
        global.push_back(std::move(ranks));
      }
  }

  // tp.kv: blocks of kv_copies consecutive positions along the fastest TP axis (stride 1 in t), so
  // blocks of consecutive t.
  if (config_.kv_copies > 1) {
    const int axis = grid_.axes().front().size;
    require(axis % config_.kv_copies == 0, "kv_copies=", config_.kv_copies, " must divide the ", axis,
            " ranks of the fastest TP axis");
    auto& kv = groups_[group::tp_kv];
    for (const auto& tp_group : groups_.at(group::tp))
      for (std::size_t t = 0; t < tp_group.size(); t += static_cast<std::size_t>(config_.kv_copies))
        kv.emplace_back(tp_group.begin() + static_cast<std::ptrdiff_t>(t),
                        tp_group.begin() + static_cast<std::ptrdiff_t>(t) + config_.kv_copies);
  }

  // dp × depth: the union of the dp groups of a tp.dep group's members, ranks ascending.  The
  // two axes are independent, so every member of the union yields the same union.
  if (config_.tp_mode == TpMode::d2p5) {
    std::vector<int> dp_of(config_.world), dep_of(config_.world), done(config_.world, 0);
    for (std::size_t g = 0; g < groups_.at(group::dp).size(); ++g)
      for (int r : groups_.at(group::dp)[g]) dp_of[r] = static_cast<int>(g);
    for (std::size_t g = 0; g < groups_.at(group::tp_dep).size(); ++g)
      for (int r : groups_.at(group::tp_dep)[g]) dep_of[r] = static_cast<int>(g);
    auto& combined = groups_[kDpDepthGroup];
    for (int r = 0; r < config_.world; ++r) {
      if (done[r]) continue;
      std::vector<int> members;
      for (int slab : groups_.at(group::tp_dep)[dep_of[r]])
        for (int s : groups_.at(group::dp)[dp_of[slab]]) members.push_back(s);
      std::sort(members.begin(), members.end());
      for (int s : members) done[s] = 1;
      combined.push_back(std::move(members));
    }
  }

  for (const auto& [name, groups] : groups_) {
    std::vector<int> index(config_.world, -1);
    for (std::size_t g = 0; g < groups.size(); ++g)
      for (int r : groups[g]) index[r] = static_cast<int>(g);
    index_of_rank_[name] = std::move(index);
  }
}

std::vector<std::string> Topology::group_names() const {
  std::vector<std::string> out = {group::world};
  out.insert(out.end(), mesh_tokens().begin(), mesh_tokens().end());
  out.push_back(group::embedding);
  if (config_.stage_mapping == StageMapping::mirrored) out.push_back(group::mirror);
  for (const auto& name : grid_.group_names())
    if (name != group::tp) out.push_back(name);
  if (config_.tp_mode == TpMode::d2p5) out.push_back(kDpDepthGroup);
  if (config_.kv_copies > 1) out.push_back(group::tp_kv);
  return out;
}

// "pp-tp" → "tp-pp": any '-'-joined set of mesh axes maps to the stored name (axes in the order
// tp, dp, cp, pp, which spells the eight tokens as Megatron does).
std::string Topology::canonical_name(const std::string& name) const {
  if (groups_.count(name)) return name;
  std::ostringstream known;
  for (const auto& n : group_names()) known << ' ' << n;
  if (name.rfind("tp.", 0) == 0)
    throw_error("unknown mesh group '", name, "' for TP mode ", tp_mode_name(config_.tp_mode), "; known groups:", known.str());
  std::vector<std::string> parts = split_token(name);
  for (const auto& part : parts)
    require(part == "tp" || part == "dp" || part == "cp" || part == "pp", "unknown mesh group '", name,
            "'; known groups:", known.str(), " (or any '-'-joined set of tp, dp, cp, pp)");
  std::vector<std::string> axes = generator_.token_axes(name);  // reports a repeated axis
  std::string out;
  for (const char* axis : {"tp", "dp", "cp", "pp"}) {
    if (std::find(axes.begin(), axes.end(), axis) == axes.end()) continue;
    if (!out.empty()) out += '-';
    out += axis;
  }
  return out;
}

const std::vector<std::vector<int>>& Topology::groups(const std::string& name) const {
  return groups_.at(canonical_name(name));
}

const std::vector<std::vector<int>>& Topology::tp_groups(const std::string& name) const {
  auto names = grid_.group_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::ostringstream known;
    for (const auto& n : names) known << ' ' << n;
    throw_error("unknown TP group '", name, "' for TP mode ", tp_mode_name(config_.tp_mode), "; expected one of:", known.str());
  }
  return groups_.at(name);
}

int Topology::group_index(const std::string& name, int rank) const {
  require(rank >= 0 && rank < config_.world, "rank ", rank, " is outside the mesh of world=", config_.world);
  return index_of_rank_.at(canonical_name(name))[rank];
}

const std::vector<int>& Topology::group_of(const std::string& name, int rank) const {
  int g = group_index(name, rank);
  require(g >= 0, "rank ", rank, " belongs to no '", name, "' group");
  return groups(name)[g];
}

int Topology::tp_rank(int rank) const {
  const auto& members = group_of(group::tp, rank);
  return static_cast<int>(std::find(members.begin(), members.end(), rank) - members.begin());
}

int Topology::nodes() const {
  int per = config_.ranks_per_node;
  return per == 0 ? 1 : (config_.world + per - 1) / per;
}

int Topology::node_of(int rank) const {
  require(rank >= 0 && rank < config_.world, "rank ", rank, " is outside the mesh of world=", config_.world);
  return config_.ranks_per_node == 0 ? 0 : rank / config_.ranks_per_node;
}

bool Topology::crosses_nodes(const std::string& name) const {
  for (const auto& group : groups(name))
    for (int r : group)
      if (node_of(r) != node_of(group.front())) return true;
  return false;
}

int Topology::ranks_per_node_in(const std::string& name) const {
  // One count per node, reused for every group: the planner asks this for each call it prices.
  std::vector<int> on_node(static_cast<std::size_t>(nodes()), 0);
  int fewest = 0;
  for (const auto& group : groups(name)) {
    for (int r : group) ++on_node[static_cast<std::size_t>(node_of(r))];
    for (int r : group) {
      int& count = on_node[static_cast<std::size_t>(node_of(r))];
      if (count > 0) fewest = fewest == 0 ? count : std::min(fewest, count);
      count = 0;  // each node counted once, and clean for the next group
    }
  }
  return fewest;
}

LinkClass Topology::link_class(const std::string& name) const {
  return crosses_nodes(name) ? LinkClass::inter_node : LinkClass::intra_node;
}

std::string Topology::to_json() const {
  nlohmann::ordered_json doc;
  doc["world"] = world();
  doc["order"] = order();
  doc["sizes"] = {{"tp", tp()}, {"pp", pp()}, {"dp", dp()}, {"cp", cp()}};
  auto& all = doc["groups"] = nlohmann::ordered_json::object();
  std::vector<std::string> names = mesh_tokens();
  names.push_back(group::embedding);
  if (config_.stage_mapping == StageMapping::mirrored) names.push_back(group::mirror);
  if (config_.kv_copies > 1) names.push_back(group::tp_kv);
  for (const auto& name : names) all[name] = groups(name);
  auto& sub = doc["tp_groups"] = nlohmann::ordered_json::object();
  for (const auto& name : tp_group_names()) sub[name] = tp_groups(name);
  std::ostringstream os;
  write_json(os, doc);
  os << "\n";
  return os.str();
}

std::string Topology::to_table() const {
  std::ostringstream os;
  os << "mesh: world=" << world() << "  tp=" << tp() << " pp=" << pp() << " dp=" << dp() << " cp=" << cp()
     << "  order=" << order() << "  tp-mode=" << tp_mode_name(tp_mode());
  if (grid_.kind() != TpGridKind::d1) os << " (q=" << grid_.q() << (grid_.kind() == TpGridKind::d2p5 ? ", d=" : "");
  if (grid_.kind() == TpGridKind::d2p5) os << grid_.depth();
  if (grid_.kind() != TpGridKind::d1) os << ")";
  const bool placed = config_.ranks_per_node > 0;
  if (placed) os << "  ranks/node=" << config_.ranks_per_node << " (" << nodes() << " nodes)";
  os << "\n";
  if (placed) os << "groups marked * span more than one node\n";

  for (const auto& name : group_names()) {
    const auto& groups_of_name = groups(name);
    std::set<std::size_t> sizes;
    for (const auto& g : groups_of_name) sizes.insert(g.size());
    os << "\n" << name << ": " << groups_of_name.size() << (groups_of_name.size() == 1 ? " group" : " groups")
       << " of " << *sizes.rbegin() << (sizes.size() > 1 ? " or fewer" : "");
    if (placed) os << ", " << link_class_name(link_class(name));
    os << "\n";
    if (*sizes.rbegin() == 1 && groups_of_name.size() > 1) {  // a size-1 axis: nothing to list
      os << "  (each rank alone)\n";
      continue;
    }
    // Wrap the groups at about 100 columns.
    std::size_t column = 0;
    for (const auto& group : groups_of_name) {
      std::ostringstream one;
      // A long run of consecutive ranks reads better, and stays short at scale, as [first..last].
      const bool run = group.size() > 4 && group.back() - group.front() + 1 == static_cast<int>(group.size()) &&
                       std::is_sorted(group.begin(), group.end());
      one << '[';
      if (run)
        one << group.front() << ".." << group.back();
      else
        for (std::size_t m = 0; m < group.size(); ++m) one << (m ? " " : "") << group[m];
      one << ']';
      if (placed && std::any_of(group.begin(), group.end(), [&](int r) { return node_of(r) != node_of(group[0]); }))
        one << '*';
      std::string text = one.str();
      if (column > 0 && column + 1 + text.size() > 100) {
        os << "\n";
        column = 0;
      }
      os << (column == 0 ? "  " : " ") << text;
      column += (column == 0 ? 2 : 1) + text.size();
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace mdtp
