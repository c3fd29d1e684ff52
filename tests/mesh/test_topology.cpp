// Topology: the pure (no MPI) layout, its validation messages, placement and JSON.
#include <cctype>
#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mesh/topology.hpp"

using mdtp::MeshConfig;
using mdtp::Topology;
using Groups = std::vector<std::vector<int>>;
using Catch::Matchers::Contains;

namespace {

MeshConfig make(int world, int tp, int pp, int cp = 1, std::string order = "tp-cp-dp-pp", std::string mode = "1d",
                int depth = 1, int per_node = 0) {
  MeshConfig c;
  c.world = world;
  c.tp = tp;
  c.pp = pp;
  c.cp = cp;
  c.order = order;
  c.tp_mode = mdtp::parse_tp_mode(mode);
  c.tp_depth = depth;
  c.ranks_per_node = per_node;
  return c;
}

// A minimal JSON reader (objects, arrays, strings without escapes, integers), enough to check
// to_json's shape without trusting its own writer.
struct Json {
  enum Kind { object, array, string, number } kind = number;
  std::vector<std::pair<std::string, Json>> members;  // object, in order
  std::vector<Json> items;                            // array
  std::string text;
  long long value = 0;
  const Json& operator[](const std::string& key) const {
    for (const auto& [k, v] : members)
      if (k == key) return v;
    throw mdtp::Error("missing key " + key);
  }
  Groups groups() const {
    Groups out;
    for (const auto& g : items) {
      out.emplace_back();
      for (const auto& r : g.items) out.back().push_back(static_cast<int>(r.value));
    }
    return out;
  }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string& s) : s_(s) {}
  Json document() {
    Json j = value();
    skip();
    mdtp::require(pos_ == s_.size(), "trailing text at ", pos_);
    return j;
  }

 private:
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip();
    mdtp::require(pos_ < s_.size() && s_[pos_] == c, "expected '", c, "' at ", pos_);
    ++pos_;
  }
  bool peek(char c) {
    skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  std::string str() {
    expect('"');
    auto end = s_.find('"', pos_);
    std::string out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  Json value() {
    Json j;
    if (peek('{')) {
      j.kind = Json::object;
      expect('{');
      if (!peek('}'))
        do {
          std::string key = str();
          expect(':');
          j.members.emplace_back(key, value());
        } while (peek(',') && (++pos_, true));
      expect('}');
    } else if (peek('[')) {
      j.kind = Json::array;
      expect('[');
      if (!peek(']'))
        do j.items.push_back(value());
        while (peek(',') && (++pos_, true));
      expect(']');
    } else if (peek('"')) {
      j.kind = Json::string;
      j.text = str();
    } else {
      std::size_t used = 0;
      j.value = std::stoll(s_.substr(pos_), &used);
      pos_ += used;
    }
    return j;
  }
  const std::string& s_;
  std::size_t pos_ = 0;
};

}  // namespace

TEST_CASE("Topology reproduces the 16-rank worked example", "[mesh][topology]") {
  Topology topo(make(16, 2, 4, 1, "tp-dp-pp"));
  CHECK(topo.dp() == 2);
  CHECK(topo.order() == "tp-dp-pp-cp");
  CHECK(topo.groups("tp") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
  CHECK(topo.groups("dp") == Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
  CHECK(topo.groups("pp") == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  CHECK(topo.groups("tp-pp") == Groups{{0, 1, 4, 5, 8, 9, 12, 13}, {2, 3, 6, 7, 10, 11, 14, 15}});
  CHECK(topo.groups("pp-tp") == topo.groups("tp-pp"));
  CHECK(topo.groups("embedding") == Groups{{0, 12}, {1, 13}, {2, 14}, {3, 15}});
  CHECK(topo.groups("world") == Groups{{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}});
  CHECK(topo.group_of("dp", 5) == std::vector<int>{5, 7});
  CHECK(topo.group_index("embedding", 5) == -1);
  CHECK_THROWS_WITH(topo.group_of("embedding", 5), Contains("rank 5") && Contains("embedding"));
  CHECK(topo.tp_rank(7) == 1);
}

TEST_CASE("Embedding group with a single pipeline stage is the stage itself", "[mesh][topology]") {
  Topology topo(make(4, 2, 1));
  CHECK(topo.groups("embedding") == Groups{{0}, {1}, {2}, {3}});
}

TEST_CASE("TP sub-groups across all TP groups, in Megatron order", "[mesh][topology]") {
  // tp=4 (2D, q=2) outermost in the order, so TP groups are strided: pp-dp-tp.
  Topology topo(make(16, 4, 2, 1, "pp-dp-tp", "2d"));
  const Groups tp = topo.groups("tp");
  CHECK(tp == Groups{{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}});
  Groups rows, cols;
  for (const auto& g : tp) {
    rows.push_back({g[0], g[1]});
    rows.push_back({g[2], g[3]});
    cols.push_back({g[0], g[2]});
    cols.push_back({g[1], g[3]});
  }
  CHECK(topo.tp_groups("tp.row") == rows);
  CHECK(topo.tp_groups("tp.col") == cols);
  CHECK(topo.tp_groups("tp") == tp);
  CHECK(topo.tp_group_names() == std::vector<std::string>{"tp", "tp.row", "tp.col"});
  CHECK(topo.group_names() == std::vector<std::string>{"world", "tp", "pp", "dp", "cp", "tp-pp", "tp-dp", "dp-cp",
                                                       "tp-dp-cp", "embedding", "tp.row", "tp.col"});
  CHECK_THROWS_WITH(topo.tp_groups("tp.dep"), Contains("unknown TP group 'tp.dep'") && Contains("2d"));
  CHECK_THROWS_WITH(topo.groups("tp.input"), Contains("unknown mesh group 'tp.input'"));
  CHECK_THROWS_WITH(topo.groups("bogus"), Contains("unknown mesh group 'bogus'"));
}

TEST_CASE("Every invalid mesh is refused with a message naming the value", "[mesh][topology]") {
  CHECK_THROWS_WITH(Topology(make(12, 2, 4)), Contains("world=12") && Contains("tp*pp*cp=8"));
  CHECK_THROWS_WITH(Topology(make(0, 1, 1)), Contains("world=0"));
  CHECK_THROWS_WITH(Topology(make(12, 6, 1, 1, "tp-cp-dp-pp", "2d")),
                    Contains("2D tensor parallelism needs a square TP size; got tp=6"));
  CHECK_THROWS_WITH(Topology(make(8, 8, 1, 1, "tp-cp-dp-pp", "2.5d", 3)),
                    Contains("2.5D") && Contains("tp=8") && Contains("d=3"));
  CHECK_THROWS_WITH(Topology(make(8, 8, 1, 1, "tp-cp-dp-pp", "2.5d", 1)),
                    Contains("2.5D") && Contains("tp=8") && Contains("d=1"));
  CHECK_THROWS_WITH(Topology(make(9, 9, 1, 1, "tp-cp-dp-pp", "3d")),
                    Contains("3D tensor parallelism needs a cubic TP size; got tp=9"));
  CHECK_THROWS_WITH(Topology(make(4, 2, 2, 1, "tp-ep-pp")), Contains("unknown axis 'ep'"));
  CHECK_THROWS_WITH(Topology(make(4, 2, 2, 1, "tp-pp-tp")), Contains("'tp' appears more than once"));
  CHECK_THROWS_WITH(Topology(make(8, 2, 2, 1, "tp-pp")), Contains("axis dp of size 2"));
  CHECK_THROWS_WITH(Topology(make(4, 0, 1)), Contains("tp=0"));
  CHECK_THROWS_WITH(Topology(make(4, 1, -1)), Contains("pp=-1"));
  CHECK_THROWS_WITH(Topology(make(4, 1, 1, 0)), Contains("cp=0"));
  CHECK_THROWS_WITH(Topology(make(4, 2, 1, 1, "tp-cp-dp-pp", "4d")), Contains("unknown tensor-parallel mode '4d'"));
  CHECK_THROWS_WITH(Topology(make(4, 4, 1, 1, "tp-cp-dp-pp", "2d", 2)), Contains("tp_depth=2"));
  CHECK_THROWS_WITH(Topology(make(4, 4, 1, 1, "tp-cp-dp-pp", "2.5d", 0)), Contains("tp_depth=0"));
  CHECK_THROWS_WITH(Topology(make(4, 1, 1, 1, "tp-cp-dp-pp", "1d", 1, -1)), Contains("ranks_per_node=-1"));
  CHECK_NOTHROW(Topology(make(8, 8, 1, 1, "tp-cp-dp-pp", "2.5d", 2)));
  CHECK_NOTHROW(Topology(make(54, 27, 2, 1, "tp-cp-dp-pp", "3d")));
  CHECK_NOTHROW(Topology(make(6, 6, 1, 1, "tp-cp-dp-pp", "1d-sp")));
}

TEST_CASE("Placement and link classes", "[mesh][topology]") {
  // 16 ranks, 8 per node: TP (2) inside nodes, PP (4) across them, DP (2) inside.
  Topology topo(make(16, 2, 4, 1, "tp-dp-pp", "1d", 1, 8));
  CHECK(topo.nodes() == 2);
  CHECK(topo.node_of(7) == 0);
  CHECK(topo.node_of(8) == 1);
  CHECK_FALSE(topo.crosses_nodes("tp"));
  CHECK_FALSE(topo.crosses_nodes("dp"));
  CHECK(topo.crosses_nodes("pp"));
  CHECK(topo.crosses_nodes("embedding"));
  CHECK(topo.link_class("tp") == mdtp::LinkClass::intra_node);
  CHECK(topo.link_class("tp-pp") == mdtp::LinkClass::inter_node);
  CHECK(topo.crosses_nodes("world"));
  // ranks_per_node = 0: everything on one node.
  Topology single(make(16, 2, 4, 1, "tp-dp-pp"));
  CHECK(single.nodes() == 1);
  CHECK_FALSE(single.crosses_nodes("pp"));
  // TP sub-groups: 3D q=2 in nodes of 4 ranks: input (stride 1) and weight (stride 2) stay on a
  // node, output (stride 4) crosses.
  Topology three(make(8, 8, 1, 1, "tp-cp-dp-pp", "3d", 1, 4));
  CHECK_FALSE(three.crosses_nodes("tp.input"));
  CHECK_FALSE(three.crosses_nodes("tp.input-weight"));
  CHECK(three.crosses_nodes("tp.output"));
}

TEST_CASE("to_json has the documented shape and the topology's groups", "[mesh][topology]") {
  Topology topo(make(16, 8, 2, 1, "tp-cp-dp-pp", "2.5d", 2));
  Json doc = JsonReader(topo.to_json()).document();
  REQUIRE(doc.kind == Json::object);
  std::vector<std::string> keys;
  for (const auto& [k, v] : doc.members) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"world", "order", "sizes", "groups", "tp_groups"});
  CHECK(doc["world"].value == 16);
  CHECK(doc["order"].text == "tp-cp-dp-pp");
  CHECK(doc["sizes"]["tp"].value == 8);
  CHECK(doc["sizes"]["pp"].value == 2);
  CHECK(doc["sizes"]["dp"].value == 1);
  CHECK(doc["sizes"]["cp"].value == 1);
  keys.clear();
  for (const auto& [k, v] : doc["groups"].members) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"tp", "pp", "dp", "cp", "tp-pp", "tp-dp", "dp-cp", "tp-dp-cp", "embedding"});
  for (const auto& key : keys) CHECK(doc["groups"][key].groups() == topo.groups(key));
  keys.clear();
  for (const auto& [k, v] : doc["tp_groups"].members) keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"tp", "tp.row", "tp.col", "tp.dep", "tp.row-dep", "tp.col-dep"});
  for (const auto& key : keys) CHECK(doc["tp_groups"][key].groups() == topo.tp_groups(key));
  CHECK(doc["tp_groups"]["tp.dep"].groups() == Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
  CHECK(doc["groups"]["embedding"].groups() == Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});

  // 1D: tp_groups is just "tp"; the effective order has the appended axes.
  Json one = JsonReader(Topology(make(4, 2, 1, 1, "tp-dp")).to_json()).document();
  CHECK(one["order"].text == "tp-dp-pp-cp");
  REQUIRE(one["tp_groups"].members.size() == 1);
  CHECK(one["tp_groups"]["tp"].groups() == Groups{{0, 1}, {2, 3}});
}

TEST_CASE("to_table lists sizes, order and every group kind", "[mesh][topology]") {
  std::string table = Topology(make(16, 2, 4, 1, "tp-dp-pp", "1d", 1, 8)).to_table();
  CHECK_THAT(table, Contains("world=16") && Contains("tp=2 pp=4 dp=2 cp=1") && Contains("order=tp-dp-pp-cp"));
  CHECK_THAT(table, Contains("\ntp: 8 groups of 2, intra-node\n  [0 1] [2 3]"));
  CHECK_THAT(table, Contains("\npp: 4 groups of 4, inter-node\n  [0 4 8 12]* "));
  CHECK_THAT(table, Contains("\nembedding: 4 groups of 2, inter-node"));
  std::string plain = Topology(make(8, 8, 1, 1, "tp-cp-dp-pp", "3d")).to_table();
  CHECK_THAT(plain, Contains("\ntp.output-weight: 2 groups of 4\n  [0 2 4 6] [1 3 5 7]"));
  CHECK_THAT(plain, !Contains("node"));
  CHECK_THAT(plain, Contains("\nworld: 1 group of 8\n  [0..7]\n"));
  CHECK_THAT(plain, Contains("\ncp: 8 groups of 1\n  (each rank alone)\n"));
}

TEST_CASE("tp.kv pairs the ranks that hold copies of one key/value head, along the fastest TP axis",
          "[mesh][topology][kv]") {
  using mdtp::TpMode, mdtp::head_split_ranks, mdtp::kv_copies_for;
  // The head split is the fastest axis: t in 1D, c in 2D/2.5D, i in 3D.
  CHECK(head_split_ranks(TpMode::d1, 4, 1) == 4);
  CHECK(head_split_ranks(TpMode::d2, 9, 1) == 3);
  CHECK(head_split_ranks(TpMode::d2p5, 8, 2) == 2);
  CHECK(head_split_ranks(TpMode::d3, 27, 1) == 3);
  CHECK(kv_copies_for(1, 4) == 4);
  CHECK(kv_copies_for(2, 4) == 2);
  CHECK(kv_copies_for(8, 4) == 1);  // two heads of its own per rank
  CHECK(kv_copies_for(3, 4) == 1);  // neither divides: the model refuses it
  // 1D tp 4, dp 2: blocks of two consecutive TP ranks in each TP group.
  MeshConfig one = make(8, 4, 1, 1, "tp-cp-dp-pp", "1d");
  one.kv_copies = 2;
  CHECK(Topology(one).groups("tp.kv") == Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}});
  // 2D q 3: each tp.row (fixed r, varying c) is one block of 3.
  MeshConfig two = make(9, 9, 1, 1, "tp-cp-dp-pp", "2d");
  two.kv_copies = 3;
  const Topology t2(two);
  CHECK(t2.groups("tp.kv") == t2.groups("tp.row"));
  // 3D q 2 with dp 2 on a tp-dp order: pairs along i inside each TP group.
  MeshConfig three = make(16, 8, 1, 1, "tp-dp", "3d");
  three.kv_copies = 2;
  const Topology t3(three);
  CHECK(t3.groups("tp.kv") == t3.groups("tp.input"));
  const auto names = t3.group_names();
  CHECK(std::find(names.begin(), names.end(), "tp.kv") != names.end());
  // Absent without copies; a block that does not divide the axis is refused by name.
  const auto plain = Topology(make(4, 4, 1, 1, "tp-cp-dp-pp", "1d")).group_names();
  CHECK(std::find(plain.begin(), plain.end(), "tp.kv") == plain.end());
  MeshConfig bad = make(4, 4, 1, 1, "tp-cp-dp-pp", "1d");
  bad.kv_copies = 3;
  CHECK_THROWS_WITH(Topology(bad), Contains("kv_copies=3 must divide the 4 ranks"));
}
