// ZeRO-3 builds and loads the model shard by shard (docs/zero.md §7): `mdtp train --zero 3` never
// holds a rank's whole tensor-parallel shard of the parameters, not even at start-up, and still
// starts from exactly stage 0's model.  Per mode (none dp2; 1d tp2 dp2 and a two-stage pipeline
// none pp2 zb-h1 dp2; 2d tp4 dp2), in f64 and f32:
//  - with no step run, the checkpoint a stage-3 run writes (gathered through the engine) equals
//    stage 0's bit for bit, and the `parameters` and `gradients` peaks since before the model was
//    built are the shards the bucket plan holds (nothing else was ever allocated);
//  - after three AdamW steps the `parameters` peak is at most what the plan says a stage-3 rank
//    holds inside a pass, and strictly below stage 0's (the whole TP shard Ψ/tp); in f64 the
//    parameters equal stage 0's as the parity tests require (bit-identical where every reduced
//    element is a two-term sum, else within 1e-10);
//  - a checkpoint written by stage 0 loads into stage 3 through the block (hyperslab) reads and
//    is written back bit-identical, AdamW moments included, with again only the shards allocated;
//  - each rank verifies the checksum tiles it reads (io/h5_file.hpp): a flipped byte in one tile
//    fails the load on every rank with the same message, whichever ranks read that tile.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <iostream>

#include "faults/corrupt_file.hpp"
#include "file_error.hpp"
#include "io/h5_file.hpp"
#include "support/gpt_harness.hpp"
#include "train/trainer.hpp"

using namespace mdtp;
using namespace mdtp::testing;

namespace {

struct ShardCase {
  std::string label;
  TpMode mode = TpMode::none;
  int tp = 1, pp = 1;
  ScheduleKind schedule = ScheduleKind::one_f_one_b;
  int micro_batches = 1;
};

std::vector<ShardCase> shard_cases(int world) {
  switch (world) {
    case 2: return {{"none dp2", TpMode::none, 1, 1, ScheduleKind::one_f_one_b, 2}};
    case 4:
      return {{"1d tp2 dp2", TpMode::d1, 2, 1, ScheduleKind::one_f_one_b, 1},
              {"none pp2 zb-h1 dp2", TpMode::none, 1, 2, ScheduleKind::zb_h1, 2}};
    case 8: return {{"2d tp4 dp2", TpMode::d2, 4, 1, ScheduleKind::one_f_one_b, 1}};
    default: return {};
  }
}

TrainConfig config_for(const ShardCase& c, int world, DType dtype) {
  TrainConfig t;
  t.spec.layout.mode = c.mode;
  t.spec.layout.tp = c.tp;
  t.spec.layout.pp = c.pp;
  t.spec.layout.schedule = c.schedule;
  t.spec.layout.micro_batches = c.micro_batches;
  // Ten blocks: two neighbouring units (what a pass holds gathered) are well under half of a
  // stage's parameters, so the in-pass peak lies below the whole TP shard.
  t.spec.model = ModelShape{10, 32, 4, 16, 0};
  t.spec.global_batch = 2 * world / (c.tp * c.pp);
  t.spec.optimizer.lr = 2e-2;
  t.spec.precision = precision_for(dtype);
  t.spec.seed = 31;
  t.spec.zero.bucket_mb = 0.004;  // several buckets per unit
  return t;
}

std::int64_t bytes_of(const std::vector<std::pair<MemCategory, std::int64_t>>& rows, MemCategory c) {
  for (const auto& [category, bytes] : rows)
    if (category == c) return bytes;
  FAIL("no row for " << mem_category_name(c));
  return -1;
}

// Whether two checkpoints hold the same datasets with bitwise equal values, /optim included.
void check_same_checkpoint(const std::string& a, const std::string& b) {
  const H5File fa = H5File::open_read(a, "test"), fb = H5File::open_read(b, "test");
  std::vector<std::string> keys;
  for (const std::string& key : fb.children("/"))
    if (key != "optim") keys.push_back(key);
  if (fb.has("optim/exp_avg"))
    for (const std::string group : {"optim/exp_avg", "optim/exp_avg_sq"})
      for (const std::string& key : fb.children(group)) keys.push_back(group + "/" + key);
  REQUIRE(keys.size() > 2);
  for (const std::string& key : keys) {
    INFO(key);
    REQUIRE(fa.has(key));
    const std::vector<double> x = fa.read_real(key), y = fb.read_real(key);
    REQUIRE(x.size() == y.size());
    std::size_t differing = 0;
    for (std::size_t i = 0; i < y.size(); ++i) differing += x[i] != y[i];
    CHECK(differing == 0);
  }
}

TrainResult run(TrainConfig t, const std::string& save) {
  t.save = shared_path(save);
  TrainResult r = train(t, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  return r;
}

// With no step run, stage 3 has allocated only its shards: the peaks equal the held bytes, which
// equal the bucket plan's.
void check_shards_only(const TrainResult& r) {
  for (const MemCategory c : {MemCategory::parameters, MemCategory::gradients}) {
    INFO(mem_category_name(c));
    CHECK(bytes_of(r.memory_peak, c) == bytes_of(r.memory_held, c));
    CHECK(bytes_of(r.memory_held, c) == bytes_of(r.memory_model, c));
  }
}

}  // namespace

TEST_CASE("ZeRO-3 initialises and loads the model shard by shard, bit-identical to stage 0",
          "[train][zero][memory][checkpoint]") {
  const int world = world_size();
  for (const ShardCase& c : shard_cases(world))
    for (const DType dtype : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.label << " " << dtype_name(dtype)) {
        const std::string tag = c.label + "-" + dtype_name(dtype);
        const TrainConfig base = config_for(c, world, dtype);

        // Step 0: the initial model.
        TrainConfig t0 = base;
        t0.steps = 0;
        const TrainResult r00 = run(t0, tag + "-z0-s0.h5");
        t0.spec.zero.stage = 3;
        const TrainResult r30 = run(t0, tag + "-z3-s0.h5");
        check_same_checkpoint(shared_path(tag + "-z3-s0.h5"), shared_path(tag + "-z0-s0.h5"));
        check_shards_only(r30);
        const std::int64_t tp_shard_bytes = bytes_of(r00.memory_held, MemCategory::parameters);  // Ψ/tp
        CHECK(bytes_of(r00.memory_peak, MemCategory::parameters) == tp_shard_bytes);
        CHECK(bytes_of(r30.memory_peak, MemCategory::parameters) < tp_shard_bytes);
        CHECK(bytes_of(r30.memory_peak, MemCategory::gradients) < bytes_of(r00.memory_held, MemCategory::gradients));

        // Three AdamW steps.
        TrainConfig t3 = base;
        t3.steps = 3;
        const TrainResult r03 = run(t3, tag + "-z0-s3.h5");
        t3.spec.zero.stage = 3;
        const TrainResult r33 = run(t3, tag + "-z3-s3.h5");
        const std::int64_t peak = bytes_of(r33.memory_peak, MemCategory::parameters);
        const std::int64_t in_pass = r33.kept_activations.parameters_in_pass_model;
        INFO("parameters peak " << peak << " B, in-pass model " << in_pass << " B, whole TP shard " << tp_shard_bytes
                                << " B");
        CHECK(peak <= in_pass);
        CHECK(peak < tp_shard_bytes);
        if (dtype == DType::f64) {
          const double err = file_error(shared_path(tag + "-z3-s3.h5"), shared_path(tag + "-z0-s3.h5"));
          INFO("parameters after 3 steps: " << err);
          const bool two_term = c.pp == 1 && (c.mode == TpMode::none || c.mode == TpMode::d1);
          if (two_term) CHECK(err == 0.0);
          else CHECK(err <= 1e-10);
          REQUIRE(r33.steps.size() == r03.steps.size());
          for (std::size_t i = 0; i < r33.steps.size(); ++i)
            CHECK(std::abs(r33.steps[i].loss - r03.steps[i].loss) <= 1e-12 * std::abs(r03.steps[i].loss));
        }
        if (world_rank() == 0)
          std::cout << "[zero3 shards] " << c.label << " " << dtype_name(dtype) << ": parameters peak " << peak
                    << " B (in-pass model " << in_pass << " B) vs whole TP shard " << tp_shard_bytes
                    << " B; at start-up " << bytes_of(r30.memory_peak, MemCategory::parameters) << " B; gradients peak "
                    << bytes_of(r33.memory_peak, MemCategory::gradients) << " B\n";

        // Stage 0's checkpoint (with moments) into stage 3, written back unchanged.
        TrainConfig load = base;
        load.steps = 0;
        load.spec.zero.stage = 3;
        load.init_from = shared_path(tag + "-z0-s3.h5");
        const TrainResult rl = run(load, tag + "-z3-loaded.h5");
        CHECK(rl.state.step == 3);
        check_same_checkpoint(shared_path(tag + "-z3-loaded.h5"), shared_path(tag + "-z0-s3.h5"));
        check_shards_only(rl);
      }
    }
}

TEST_CASE("a ZeRO-3 load verifies the tiles each rank reads; a bad tile fails it on every rank alike",
          "[train][zero][checkpoint]") {
  // One block 512 wide in f64: its Linear weights span several checksum tiles (362 x 362), so the
  // ranks read different tiles of them, and a flipped byte is seen by the ranks that read it only.
  TrainConfig t;
  t.spec.model = ModelShape{1, 512, 4, 16, 0};
  t.spec.global_batch = world_size();
  t.spec.precision = precision_for(DType::f64);
  t.spec.seed = 5;
  t.steps = 0;
  run(t, "tiles-z0.h5");
  const std::string saved = shared_path("tiles-z0.h5");
  const std::string bad = shared_path("tiles-bad.h5");
  if (world_rank() == 0) {
    std::filesystem::copy_file(saved, bad, std::filesystem::copy_options::overwrite_existing);
    // Stored [out, in] = [2048, 512]: row 2000, column 500 (tile (5, 1)).
    flip_byte(bad, data_offset(bad, "transformer.h.0.mlp.c_fc.weight") + (2000 * 512 + 500) * 8 + 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  t.spec.zero.stage = 3;
  // The intact file loads at stage 3 and is written back as it was.
  t.init_from = saved;
  run(t, "tiles-z3.h5");
  check_same_checkpoint(shared_path("tiles-z3.h5"), saved);
  // The corrupt one: every rank throws the message of the lowest rank that read the bad tile.
  t.init_from = bad;
  t.save.clear();
  CHECK_THROWS_WITH(train(t, MPI_COMM_WORLD),
                    Catch::Matchers::Contains("dataset 'transformer.h.0.mlp.c_fc.weight' fails its checksum (tile rows "
                                              "[1810, 2048) x columns [362, 512)"));
  MPI_Barrier(MPI_COMM_WORLD);
}
