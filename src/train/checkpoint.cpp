#include "train/checkpoint.hpp"

#include "plan/bucket_plan.hpp"  // optimizer_state_dtype

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "mesh/mesh.hpp"
#include "io/h5_file.hpp"
#include "run/rank_stats.hpp"
#include "run/root_task.hpp"
#include "train/checkpoint_provenance.hpp"
#include "model/checkpoint_pieces.hpp"
#include "train/hf_checkpoint.hpp"
#include "train/stage_gather.hpp"

namespace mdtp {
namespace {

const char* const kConfigKeys[] = {"vocab_size", "n_layer", "n_head", "n_embd", "block_size"};

std::int64_t config_value(const ModelShape& c, const std::string& key) {
  if (key == "vocab_size") return c.vocab;
  if (key == "n_layer") return c.layers;
  if (key == "n_head") return c.heads;
  if (key == "n_embd") return c.hidden;
  return c.seq;
}

// The sizes under nanoGPT's names, the family as Hugging Face's model_type, and for llama the rest
// of its shape under Hugging Face's config names.
void write_config(H5File& file, const ModelShape& c) {
  for (const char* key : kConfigKeys) file.set_attribute("/", key, config_value(c, key));
  file.set_attribute("/", "model_type", std::string(model_family_name(c.family)));
  file.set_attribute("/", "tie_word_embeddings", static_cast<std::int64_t>(c.tied_head ? 1 : 0));
  if (c.family != ModelFamily::llama) return;
  file.set_attribute("/", "intermediate_size", c.ffn());
  file.set_attribute("/", "num_key_value_heads", c.kv());
  file.set_attribute("/", "rope_theta", c.rope_theta);
  file.set_attribute("/", "rms_norm_eps", c.norm_eps);
}

// A kind of tensor a file holds for every parameter, under a dataset prefix.
struct StreamedPart {
  std::string prefix;
  ZeroTensor what;
  double divide_by = 1.0;  // the gradients' loss scale (f16), divided out before writing
};

// Writes `path` through a temporary file renamed into place, on world rank 0: `header`, then each
// part's full tensor of every parameter (the tied wte once), one tensor at a time as the stages
// stream them (train/stage_gather.hpp), so no rank holds more than one full tensor.  Collective
// over `world`.  A failed write on rank 0 must not leave the others in the next gather: the error
// is kept, the walk goes on without writing, and every rank throws it at the end.
void write_streamed(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world,
                    const std::vector<StreamedPart>& parts, const std::function<void(H5File&)>& header) {
  // The weights as the optimizer holds them: f32 master weights (and f32 moments, gradients) for
  // bf16/f16 parameters, else the parameters' dtype.  Any precision loads any checkpoint.
  const DType storage = optimizer_state_dtype(model.mode().context().dtype);
  const auto& params = engine.parameters();
  std::string error;
  auto stream = [&](H5File* file) {
    std::set<std::string> written;
    for (const StreamedPart& part : parts)
      stream_stage_tensors(
          params.size(),
          [&](std::size_t i) {
            std::vector<double> values = engine.gather_full(i, part.what);
            if (part.divide_by != 1.0)
              for (double& v : values) v /= part.divide_by;
            return NamedTensor{params[i].name(), params[i].checkpoint_shape(), std::move(values)};
          },
          [&](NamedTensor&& t) {
            if (file == nullptr || !error.empty() || !written.insert(part.prefix + t.name).second) return;
            try {
              // Fused tensors are written as Hugging Face's separate ones (model/checkpoint_pieces.hpp).
              const std::int64_t cols = t.shape.back();
              for (const CheckpointPiece& piece : checkpoint_pieces(t.name, t.shape, model.config())) {
                const auto first = t.values.begin() + piece.first_row * cols;
                file->write_real(part.prefix + piece.name, piece.shape,
                                 std::vector<double>(first, first + piece.rows * cols), storage);
              }
            } catch (const std::exception& e) {
              error = e.what();
            }
          },
          model.mode().context().mesh, world);
  };
  int rank = 0;
  MPI_Comm_rank(world, &rank);
  bool streamed = false;
  if (rank == 0) {
    try {
      write_atomically(path, [&](H5File& file) {
        header(file);
        streamed = true;
        stream(&file);
        if (!error.empty()) throw Error(error);  // the temporary file is dropped; `path` is untouched
      });
    } catch (const std::exception& e) {
      if (error.empty()) error = e.what();
    }
  }
  if (!streamed) stream(nullptr);
  run::run_on_root(world, [&] {
    if (!error.empty()) throw Error(error);
  });
}

// Checks that `key` exists with the expected shape; the error names the file, the key and both shapes.
void check_param(const H5File& file, const std::string& key, const Shape& expected) {
  require(file.has(key), "checkpoint '", file.path(), "' has no dataset '", key, "' (expected shape ",
          shape_string(expected), ")");
  const Shape shape = file.shape(key);
  require(shape == expected, "checkpoint '", file.path(), "': dataset '", key, "' has shape ", shape_string(shape),
          "; this model needs ", shape_string(expected));
  require(file.is_real(key), "checkpoint '", file.path(), "': dataset '", key, "' must hold floating-point values");
}

// Reads `key` whole after check_param.
std::vector<double> read_param(const H5File& file, const std::string& key, const Shape& expected) {
  check_param(file, key, expected);
  return file.read_real(key);
}

// The datasets a parameter is stored as, under `prefix` (model/checkpoint_pieces.hpp).
std::vector<CheckpointPiece> pieces_of(const ModelParam& p, const ModelShape& config) {
  return checkpoint_pieces(p.name(), p.checkpoint_shape(), config);
}

// A parameter's checkpoint tensor read whole from its pieces, each checked.
std::vector<double> read_pieces(const H5File& file, const std::string& prefix, const ModelParam& p,
                                const ModelShape& config) {
  std::vector<double> out;
  for (const CheckpointPiece& piece : pieces_of(p, config)) {
    std::vector<double> part = read_param(file, prefix + piece.name, piece.shape);
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

// ZeRO-3 reads only blocks of a tensor: check_param here.  A dataset with block checksums is
// verified block by block as each rank reads its part (no rank reads the rest); one without them
// (a file written before them) is verified whole here, streamed (bounded memory).
void check_streamed(const H5File& file, const std::string& key, const Shape& expected) {
  check_param(file, key, expected);
  if (!file.has_tile_checksums(key)) file.verify_checksum(key);
}

void check_pieces_streamed(const H5File& file, const std::string& prefix, const ModelParam& p,
                           const ModelShape& config) {
  for (const CheckpointPiece& piece : pieces_of(p, config))
    check_streamed(file, prefix + piece.name, piece.shape);
}

// Blocks of a parameter's checkpoint tensor from the pieces that hold their rows, concatenated.
CheckpointBlockReader piece_reader(const H5File& file, const std::string& prefix, std::vector<CheckpointPiece> pieces) {
  return [&file, prefix, pieces = std::move(pieces)](std::int64_t r0, std::int64_t rows, std::int64_t c0,
                                                     std::int64_t cols) {
    std::vector<double> out;
    out.reserve(static_cast<std::size_t>(rows * cols));
    for (const CheckpointPiece& piece : pieces) {
      const std::int64_t lo = std::max(r0, piece.first_row), hi = std::min(r0 + rows, piece.first_row + piece.rows);
      if (lo >= hi) continue;
      const std::vector<double> part = file.read_real_block(prefix + piece.name, lo - piece.first_row, hi - lo, c0, cols);
      out.insert(out.end(), part.begin(), part.end());
    }
    return out;
  };
}

// Whether two 2-D datasets of one shape hold the same values, compared block by block of rows.
bool equal_streamed(const H5File& file, const std::string& a, const std::string& b, const Shape& shape) {
  const std::int64_t rows = shape.size() == 1 ? 1 : shape[0], cols = shape.back();
  const std::int64_t step = std::max<std::int64_t>(1, (std::int64_t{1} << 17) / std::max<std::int64_t>(1, cols));
  for (std::int64_t r = 0; r < rows; r += step) {
    const std::int64_t n = std::min(step, rows - r);
    if (file.read_real_block(a, r, n, 0, cols) != file.read_real_block(b, r, n, 0, cols)) return false;
  }
  return true;
}

}  // namespace

ModelShape read_checkpoint_config(const std::string& path) {
  if (is_hf_checkpoint(path)) return read_hf_config(path);
  H5File file = H5File::open_read(path, "checkpoint");
  ModelShape c;
  std::map<std::string, std::int64_t> values;
  for (const char* key : kConfigKeys) {
    auto v = file.int_attribute("/", key);
    require(v.has_value(), "checkpoint '", path, "' has no root attribute '", key,
            "' (expected vocab_size, n_layer, n_head, n_embd, block_size)");
    require(*v > 0, "checkpoint '", path, "': root attribute ", key, "=", *v, " must be positive");
    values[key] = *v;
  }
  c.vocab = values["vocab_size"];
  c.layers = values["n_layer"];
  c.heads = values["n_head"];
  c.hidden = values["n_embd"];
  c.seq = values["block_size"];
  // Files written before model_type existed hold GPT-2.
  const std::string family = file.string_attribute("/", "model_type").value_or("gpt2");
  try {
    c.family = parse_model_family(family);
  } catch (const Error& e) {
    throw_error("checkpoint '", path, "': root attribute model_type: ", e.what());
  }
  if (c.family == ModelFamily::llama) {
    auto need_int = [&](const char* key) {
      auto v = file.int_attribute("/", key);
      require(v.has_value(), "checkpoint '", path, "' (model_type llama) has no root attribute '", key, "'");
      return *v;
    };
    auto need_real = [&](const char* key) {
      auto v = file.real_attribute("/", key);
      require(v.has_value(), "checkpoint '", path, "' (model_type llama) has no root attribute '", key, "'");
      return *v;
    };
    c.ffn_hidden = need_int("intermediate_size");
    c.kv_heads = need_int("num_key_value_heads");
    c.rope_theta = need_real("rope_theta");
    c.norm_eps = need_real("rms_norm_eps");
    c.tied_head = need_int("tie_word_embeddings") != 0;
  } else {
    // GPT-2 files written before an untied GPT-2 existed hold a tied head.
    c.tied_head = file.int_attribute("/", "tie_word_embeddings").value_or(1) != 0;
  }
  return c;
}

void save_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, const TrainingState& state,
                     MPI_Comm world) {
  if (is_hf_checkpoint(path)) return save_hf_checkpoint(path, model, engine, world);
  const bool moments = engine.has_moments();
  std::vector<StreamedPart> parts{{"", ZeroTensor::value}};
  if (moments)
    parts.insert(parts.end(), {{"optim/exp_avg/", ZeroTensor::exp_avg}, {"optim/exp_avg_sq/", ZeroTensor::exp_avg_sq}});
  write_streamed(path, model, engine, world, parts, [&](H5File& file) {
    write_config(file, model.config());
    write_checkpoint_provenance(file, model.mode().context().mesh.topology());  // code version and mesh
    file.create_group("optim");
    file.set_attribute("optim", "step", state.step);
    file.set_attribute("optim", "data_position", state.data_position);
    file.set_attribute("optim", "rng_state", static_cast<std::int64_t>(state.rng_state));
    // The optimizer's own count (AdamW's bias correction): the steps it applied, which a skipped
    // step (an f16 overflow, --skip-nonfinite) is not, unlike `step`.
    file.set_attribute("optim", "optimizer_steps", engine.step_count());
    // f16's dynamic loss scale, so that a resumed run continues with the same scale and counts.
    file.set_attribute("optim", "loss_scale", state.loss_scaler.scale);
    file.set_attribute("optim", "loss_scale_growth_tracker", state.loss_scaler.growth_tracker);
    file.set_attribute("optim", "loss_scale_hysteresis_tracker", state.loss_scaler.hysteresis_tracker);
    file.set_attribute("optim", "optimizer", std::string(optimizer_kind_name(engine.optimizer_config().kind)));
    if (moments) {
      file.create_group("optim/exp_avg");
      file.create_group("optim/exp_avg_sq");
    }
  });
}

TrainingState load_checkpoint(const std::string& path, GptModel& model, ZeroEngine& engine, MPI_Comm world) {
  if (is_hf_checkpoint(path)) {
    load_hf_checkpoint(path, model, engine);
    return {};  // weights only: step 0, fresh optimizer state
  }
  const ModelShape saved = read_checkpoint_config(path);
  require(saved == model.config(), "checkpoint '", path, "' holds a model of ", describe(saved),
          "; this run builds ", describe(model.config()));
  H5File file = H5File::open_read(path, "checkpoint");
  const auto& params = engine.parameters();

  // Read and validate everything first: the model is only changed once the whole file is good.
  // ZeRO-3 (engine.loads_shards()) reads no tensor whole: it validates shapes here, and each rank
  // then reads (and verifies) the blocks its shards hold.
  const bool by_shard = engine.loads_shards();
  std::set<std::string> known{"optim", "lm_head.weight"};
  std::vector<std::vector<double>> values;
  for (const ModelParam& p : params) {
    if (by_shard) check_pieces_streamed(file, "", p, saved);
    else values.push_back(read_pieces(file, "", p, saved));
    for (const CheckpointPiece& piece : pieces_of(p, saved)) known.insert(piece.name);
  }
  // Every dataset is a parameter of the model: held here, or (a pipeline stage holds a part of the
  // model) by another stage.
  for (const std::string& key : file.children("/"))
    require(known.count(key) || is_attention_mask_buffer(key) || unit_of_parameter(key, saved) >= 0, "checkpoint '", path,
            "' holds '", key, "', which is not a parameter of this model (", describe(saved), ")");
  // A tied head's lm_head.weight, where a file keeps one, must be the embedding.
  const std::string wte = word_embedding_name(saved);
  if (saved.tied_head && file.has("lm_head.weight") && file.has(wte)) {
    const Shape wte_shape = file.shape(wte);
    bool same = false;
    if (by_shard) {
      check_streamed(file, "lm_head.weight", wte_shape);
      check_streamed(file, wte, wte_shape);
      same = equal_streamed(file, "lm_head.weight", wte, wte_shape);
    } else {
      same = read_param(file, "lm_head.weight", wte_shape) == read_param(file, wte, wte_shape);
    }
    require(same, "checkpoint '", path, "': lm_head.weight differs from ", wte,
            "; this model ties the LM head to the token embedding");
  }
  TrainingState state;
  std::int64_t optimizer_steps = 0;
  std::vector<std::vector<double>> m, v;
  bool moments = false;
  if (file.has("optim")) {
    auto attr = [&](const char* name) {
      auto value = file.int_attribute("optim", name);
      require(value.has_value() && *value >= 0, "checkpoint '", path, "': /optim needs a non-negative integer attribute '",
              name, "'");
      return *value;
    };
    state.step = attr("step");
    optimizer_steps = file.int_attribute("optim", "optimizer_steps").value_or(state.step);  // older files: every step
    state.data_position = attr("data_position");
    state.rng_state = static_cast<std::uint64_t>(attr("rng_state"));
    if (const auto scale = file.real_attribute("optim", "loss_scale")) {  // checkpoints from before have none
      state.loss_scaler.scale = *scale;
      state.loss_scaler.growth_tracker = attr("loss_scale_growth_tracker");
      state.loss_scaler.hysteresis_tracker = file.int_attribute("optim", "loss_scale_hysteresis_tracker").value_or(0);
      state.has_loss_scaler = true;
    }
    moments = engine.has_moments() && file.has("optim/exp_avg");
    if (moments)
      for (const ModelParam& p : params) {
        if (by_shard) {
          check_pieces_streamed(file, "optim/exp_avg/", p, saved);
          check_pieces_streamed(file, "optim/exp_avg_sq/", p, saved);
          continue;
        }
        m.push_back(read_pieces(file, "optim/exp_avg/", p, saved));
        v.push_back(read_pieces(file, "optim/exp_avg_sq/", p, saved));
      }
  }
  // ZeRO-3: each rank reads the blocks of every tensor that its shards hold (HDF5 hyperslabs),
  // verifying their checksums as it goes.  Only the ranks that read a bad block see it, so the
  // ranks then agree: a failure anywhere fails the load on every rank with the same message (the
  // shards are then partly loaded; the run stops).
  if (by_shard) {
    std::string failure;
    try {
      for (std::size_t i = 0; i < params.size(); ++i) {
        const std::vector<CheckpointPiece> pieces = pieces_of(params[i], saved);
        engine.load_shard(i, ZeroTensor::value, piece_reader(file, "", pieces));
        if (moments) {
          engine.load_shard(i, ZeroTensor::exp_avg, piece_reader(file, "optim/exp_avg/", pieces));
          engine.load_shard(i, ZeroTensor::exp_avg_sq, piece_reader(file, "optim/exp_avg_sq/", pieces));
        }
      }
    } catch (const Error& e) {
      failure = e.what();
    }
    run::throw_first_failure(failure, world, model.mode().context().mesh.wait_policy());
  }
  // Otherwise each rank keeps its own shard (tensor-parallel, and over dp under ZeRO) of every tensor.
  for (std::size_t i = 0; i < values.size(); ++i) {
    engine.load_full(i, ZeroTensor::value, values[i]);
    if (moments) {
      engine.load_full(i, ZeroTensor::exp_avg, m[i]);
      engine.load_full(i, ZeroTensor::exp_avg_sq, v[i]);
    }
  }
  // A different optimizer (or none saved) starts its own step count; the data position carries on.
  engine.set_step_count(moments || !engine.has_moments() ? optimizer_steps : 0);
  return state;
}

void dump_gradients(const std::string& path, GptModel& model, ZeroEngine& engine, std::int64_t step, double loss,
                    MPI_Comm world, double loss_scale) {
  write_streamed(path, model, engine, world, {{"", ZeroTensor::grad, loss_scale}}, [&](H5File& file) {
    write_config(file, model.config());
    file.set_attribute("/", "step", step);
    file.set_attribute("/", "loss", loss);
  });
}

}  // namespace mdtp
