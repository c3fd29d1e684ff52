#pragma once
// H5File: the small HDF5 surface that checkpoints, token data and gradient dumps need — datasets
// of reals or int32 at any path, integer/real/string attributes — with errors that name the file
// and the object.  write_atomically() writes through a temporary file renamed into place, so an
// existing file is never truncated by a run that fails half-way.
//
// Integrity: every dataset written here carries an attribute `crc32` (zlib's CRC-32 of the bytes
// stored, in the file's little-endian layout), and every read verifies it, so a byte flipped on
// disk is an mdtp::Error naming the file and the dataset instead of a silently wrong tensor.
// 1-D and 2-D datasets also carry `crc32_tile_shape` ([rows, columns] of a tile; a 1-D dataset is
// one column) and `crc32_tiles` (the CRC-32 of each tile's stored bytes, row by row; tiles in
// row-major order, about 1 MiB each), so that a reader of a part of a dataset verifies what it
// reads without reading the rest.
// Datasets without the attribute (files written before it existed, or by other tools) are read
// unverified.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace mdtp {

class H5File {
 public:
  // Opens an existing HDF5 file read-only; `what` names it in errors ("checkpoint", "token data").
  static H5File open_read(const std::string& path, const std::string& what);
  // Creates (truncating) a file; use write_atomically() for outputs a user names.
  static H5File create(const std::string& path);
  H5File(H5File&& other) noexcept;
  H5File& operator=(H5File&&) = delete;
  H5File(const H5File&) = delete;
  ~H5File();

  const std::string& path() const { return path_; }
  bool has(const std::string& object) const;  // "a/b/c": every link on the way exists
  std::vector<std::string> children(const std::string& group) const;  // link names, sorted
  Shape shape(const std::string& dataset) const;
  bool is_real(const std::string& dataset) const;
  bool is_integer(const std::string& dataset) const;
  std::vector<double> read_real(const std::string& dataset) const;        // any float type
  std::vector<std::int32_t> read_int32(const std::string& dataset) const;  // any integer type that fits
  std::optional<std::int64_t> int_attribute(const std::string& object, const std::string& name) const;
  std::optional<double> real_attribute(const std::string& object, const std::string& name) const;  // a float attribute
  std::optional<std::string> string_attribute(const std::string& object, const std::string& name) const;
  // Whether `dataset` carries a checksum (then every whole read of it verifies the checksum).
  bool has_checksum(const std::string& dataset) const;
  // Whether `dataset` also carries checksums of its tiles (then every read_real_block verifies
  // the tiles it reads).  Every 1-D and 2-D dataset written here does; files written before
  // them do not.
  bool has_tile_checksums(const std::string& dataset) const;
  // A block of a 1-D or 2-D real dataset, read as an HDF5 hyperslab: rows [row0, row0 + rows) ×
  // columns [col0, col0 + cols), row-major (a 1-D dataset is one row: row0 = 0, rows = 1).  When
  // the dataset has tile checksums, the whole tiles that hold the request are read and verified,
  // and nothing else; otherwise only the request is read, unverified (verify_checksum() checks
  // the whole dataset).  An mdtp::Error when the block leaves the dataset or fails its checksum.
  std::vector<double> read_real_block(const std::string& dataset, std::int64_t row0, std::int64_t rows,
                                      std::int64_t col0, std::int64_t cols) const;
  // Verifies `dataset`'s checksum (if it has one) by streaming its stored bytes in slabs of about
  // `slab_bytes` along the first dimension: memory stays bounded whatever the dataset's size.
  void verify_checksum(const std::string& dataset, std::size_t slab_bytes = std::size_t{1} << 20) const;

  void create_group(const std::string& group);
  // Stored as f32 or f64 (`storage`); values are float64 in memory.
  void write_real(const std::string& dataset, const Shape& shape, const std::vector<double>& values, DType storage);
  void write_int32(const std::string& dataset, const Shape& shape, const std::vector<std::int32_t>& values);
  void set_attribute(const std::string& object, const std::string& name, std::int64_t value);
  void set_attribute(const std::string& object, const std::string& name, double value);
  void set_attribute(const std::string& object, const std::string& name, const std::string& value);

 private:
  H5File(long long id, std::string path, std::string what) : id_(id), path_(std::move(path)), what_(std::move(what)) {}
  long long open_dataset(const std::string& dataset) const;  // caller closes
  // A scalar attribute of HDF5 class `expected` read as the native type `native` (h5_file.cpp).
  template <class T>
  std::optional<T> numeric_attribute(const std::string& object, const std::string& name, int expected,
                                     std::int64_t native, const char* kind) const;
  // The bytes of one stored element of `dataset` (whose type is `stored_type`); an mdtp::Error
  // naming the dataset past 8 bytes, which no conversion to a double or an int64 keeps.
  std::size_t stored_element_size(const std::string& dataset, long long stored_type, const char* kind) const;
  // Reads `dataset` whole into `buffer` (room for count * max(file, `memory_type`) size bytes),
  // verifies its checksum on the stored bytes, then converts in place to `memory_type`.
  void read_checked(const std::string& dataset, long long memory_type, void* buffer, std::size_t count) const;
  // read_real_block of a dataset of shape `dims` with tile checksums: into `out` (rows * cols values).
  void read_verified_block(const std::string& dataset, const Shape& dims, std::int64_t row0, std::int64_t rows,
                           std::int64_t col0, std::int64_t cols, double* out) const;
  std::vector<std::int64_t> int_list_attribute(const std::string& object, const std::string& name) const;
  long long id_ = -1;  // hid_t
  std::string path_, what_;
};

// Runs `write` on a new file at a temporary path next to `path`, then renames it to `path`; on any
// error the temporary file is removed and `path` is left as it was.
void write_atomically(const std::string& path, const std::function<void(H5File&)>& write);

}  // namespace mdtp
