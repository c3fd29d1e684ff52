#include "plan/virtual_stage.hpp"

#include "core/error.hpp"

namespace mdtp {

StageMap::StageMap(StageMapping mapping, int stages, int chunks) : mapping_(mapping), stages_(stages), chunks_(chunks) {
  require(stages >= 1, "the pipeline size must be >= 1; got pp=", stages);
  require(chunks >= 1, "the chunks per stage must be >= 1; got chunks=", chunks);
  require(mapping == StageMapping::round_robin || chunks == 2, "a ", stage_mapping_name(mapping),
          " stage mapping holds 2 chunks per stage; got chunks=", chunks);
  require(mapping != StageMapping::mirrored || stages % 2 == 0,
          "a mirrored stage mapping pairs stage r with stage p-1-r and needs an even pp; got pp=", stages);
}

void StageMap::check_stage(int stage) const {
  require(stage >= 0 && stage < stages_, "stage ", stage, " is outside [0, ", stages_, ")");
}

void StageMap::check_virtual(int vs) const {
  require(vs >= 0 && vs < virtual_stages(), "virtual stage ", vs, " is outside [0, ", virtual_stages(), ")");
}

int StageMap::virtual_stage(int stage, int chunk) const {
  check_stage(stage);
  require(chunk >= 0 && chunk < chunks_, "chunk ", chunk, " is outside [0, ", chunks_, ")");
  switch (mapping_) {
    case StageMapping::round_robin: return chunk * stages_ + stage;
    case StageMapping::v_shape: return chunk == 0 ? stage : 2 * stages_ - 1 - stage;
    case StageMapping::mirrored: {
      const int route = chunk ^ (stage >= stages_ / 2 ? 1 : 0);
      return route * stages_ + (route == 0 ? stage : stages_ - 1 - stage);
    }
  }
  return 0;
}

int StageMap::stage_of(int vs) const {
  check_virtual(vs);
  switch (mapping_) {
    case StageMapping::round_robin: return vs % stages_;
    case StageMapping::v_shape: return vs < stages_ ? vs : 2 * stages_ - 1 - vs;
    case StageMapping::mirrored: return route(vs) == 0 ? vs % stages_ : stages_ - 1 - vs % stages_;
  }
  return 0;
}

int StageMap::chunk_of(int vs) const {
  check_virtual(vs);
  switch (mapping_) {
    case StageMapping::round_robin: return vs / stages_;
    case StageMapping::v_shape: return vs < stages_ ? 0 : 1;
    case StageMapping::mirrored: return route(vs) ^ (stage_of(vs) >= stages_ / 2 ? 1 : 0);
  }
  return 0;
}

int StageMap::position(int vs) const {
  check_virtual(vs);
  return mapping_ == StageMapping::mirrored ? vs % stages_ : vs;
}

int StageMap::direction(int stage, int chunk) const {
  const int vs = virtual_stage(stage, chunk);
  if (mapping_ == StageMapping::round_robin) return 1;
  if (mapping_ == StageMapping::v_shape) return chunk == 0 ? 1 : -1;
  return route(vs) == 0 ? 1 : -1;
}

}  // namespace mdtp
