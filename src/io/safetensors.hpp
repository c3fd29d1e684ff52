#pragma once
// Safetensors files (https://github.com/huggingface/safetensors), the format Hugging Face models
// are published in: 8 bytes of little-endian header length N, N bytes of JSON naming each tensor's
// dtype, shape and byte range, then the data buffer, row-major and little-endian.
//
// Opening reads and validates the header only, so a checkpoint of many gigabytes costs nothing
// until a tensor is read; read() then takes one tensor's bytes from the file.  Validation is
// stricter than what a reader needs to find its tensors: the ranges must tile the data buffer
// exactly (no overlap, no hole, nothing after the last tensor), because a file that does not is
// truncated, concatenated or hand-edited, and training from it would go wrong silently.  Every
// refusal is one line naming the file, the tensor or field, and the values.
//
// mdtp computes in f32, f64, bf16 and f16; a tensor of any other dtype of the format (integers,
// BOOL, the 8-, 6- and 4-bit floats, C64) is parsed and validated, but read() refuses it by name.
//
// Writing goes to a temporary file beside the target and is renamed into place at the end, so an
// interrupted or refused write leaves no partial file and never replaces a good one.
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/tensor.hpp"

namespace mdtp {

// One tensor of a file's header.  dtype is empty when the file's dtype is not one mdtp computes
// in; dtype_name is the file's spelling either way ("F32", "I64", "F8_E4M3", ...).
struct SafetensorsEntry {
  std::string name;
  std::string dtype_name;
  std::optional<DType> dtype;
  Shape shape;
  std::int64_t begin = 0;  // byte range [begin, end) of the data buffer
  std::int64_t end = 0;
};

// The format's spelling of an mdtp dtype: F32, F64, BF16, F16.
const char* safetensors_dtype_name(DType dtype);

class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  // In data order (by begin), which for files mdtp writes is the order they were written in.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  bool has(const std::string& name) const { return by_name_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  // The header's "__metadata__" (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Where the data buffer starts in the file: 8 + the header length.
  std::int64_t data_start() const { return data_start_; }

  // The tensor's elements, row-major, each converted to double exactly.
  std::vector<double> read(const std::string& name) const;

 private:
  std::string path_;
  std::int64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// One checkpoint, either a single .safetensors file or the shards of a Hugging Face index
// (model.safetensors.index.json: {"metadata": {...}, "weight_map": {tensor: shard file}}, the shard
// files relative to the index's directory), read through one interface.  Opening an index opens
// every shard's header and refuses any disagreement between the weight map and the shards.
class SafetensorsCollection {
 public:
  // A path ending in ".json" is an index; anything else a single file.
  static SafetensorsCollection open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool has(const std::string& name) const { return shard_of_.count(name) != 0; }
  const SafetensorsEntry& entry(const std::string& name) const;
  std::vector<double> read(const std::string& name) const;
  // The file that holds the tensor.
  const std::string& file_of(const std::string& name) const;
  // A single file's "__metadata__", or the index's "metadata" (values that are not strings, such
  // as the usual total_size, as their JSON text).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::size_t shard_index(const std::string& name) const;

  std::string path_;
  std::vector<SafetensorsFile> shards_;
  std::map<std::string, std::size_t> shard_of_;
  std::map<std::string, std::string> metadata_;
};

// One tensor of a file to be written: its layout, without the values.
struct SafetensorsEntrySpec {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
};

// Writes a file whose header is known before its data, one tensor at a time, so that a checkpoint
// larger than memory never has to be held whole: the constructor writes the header (offsets from
// the layout, data contiguous in layout order), write_next appends the next tensor, finish() moves
// the file into place.  Destroyed without finish() (an exception on the way), it removes its
// temporary file and leaves `path` as it was.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntrySpec> layout,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The next tensor of the layout, by name, with exactly its element count of values, each
  // rounded once (to nearest even) to the tensor's dtype.  A refused call writes nothing and the
  // writer carries on; a failed write to the disk ends it.
  void write_next(const std::string& name, const std::vector<double>& values);
  // Any tensor of the layout not written yet, at its place in the file: for producers whose order
  // is not the layout's (a pipeline's stages streaming their tensors).
  void write(const std::string& name, const std::vector<double>& values);
  // Every tensor written: the file is renamed to `path`.
  void finish();

  const std::string& temporary_path() const { return temp_; }

 private:
  void discard();
  void write_at(std::size_t index, const std::vector<double>& values);

  std::string path_;
  std::string temp_;
  std::vector<SafetensorsEntrySpec> layout_;
  std::vector<std::int64_t> offsets_;  // each tensor's first byte in the file
  std::vector<bool> written_;
  std::size_t next_ = 0;                // tensors written
  std::ofstream out_;
  bool done_ = false;    // finished, or discarded after a failure
};

struct SafetensorsTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  std::vector<double> values;  // row-major, shape_numel(shape) of them
};

// The tensors in the given order, data contiguous in that order, through SafetensorsWriter.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace mdtp
