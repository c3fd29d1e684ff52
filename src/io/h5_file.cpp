#include "io/h5_file.hpp"

#include <hdf5.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace mdtp {
namespace {

static_assert(std::endian::native == std::endian::little,
              "H5File writes its buffers as little-endian file types and checksums those bytes");

// Closes one HDF5 identifier on scope exit.
struct Closer {
  hid_t id;
  herr_t (*close)(hid_t);
  ~Closer() {
    if (id >= 0) close(id);
  }
};

herr_t collect(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

constexpr const char* kChecksum = "crc32";
// Checksums of tiles (docs/failures.md): a reader of a part of a 1-D or 2-D dataset (a ZeRO-3
// rank loading its shards: whole rows of an embedding, columns of a Linear weight stored
// [out, in]) verifies only the tiles it reads.  Tiles of about 1 MiB of stored bytes, as square
// as the shape allows, at most 4096 per dataset (32 KiB of checksums: attributes stay in the
// object header, whose limit is 64 KiB).
constexpr const char* kTileShape = "crc32_tile_shape";
constexpr const char* kTileChecksums = "crc32_tiles";
constexpr std::int64_t kChecksumTileBytes = std::int64_t{1} << 20;
constexpr std::int64_t kMaxChecksumTiles = 4096;

// A 1-D or 2-D dataset as rows x columns (a 1-D one is a column), and its tiles.
struct Tiling {
  std::int64_t rows = 0, cols = 0, tile_rows = 1, tile_cols = 1;
  std::int64_t tiles_down() const { return (rows + tile_rows - 1) / tile_rows; }
  std::int64_t tiles_across() const { return (cols + tile_cols - 1) / tile_cols; }
};

Tiling choose_tiling(const Shape& shape, std::size_t element) {
  Tiling t{shape[0], shape.size() == 2 ? shape[1] : 1};
  const std::int64_t elements = std::max<std::int64_t>(1, kChecksumTileBytes / static_cast<std::int64_t>(element));
  t.tile_cols = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::sqrt(static_cast<double>(elements))), 1, t.cols);
  t.tile_rows = std::max<std::int64_t>(1, elements / t.tile_cols);
  while (t.tiles_down() * t.tiles_across() > kMaxChecksumTiles) {
    t.tile_rows *= 2;
    t.tile_cols = std::min(t.cols, t.tile_cols * 2);
  }
  return t;
}

// `crc` carried on over `bytes` more bytes (zlib's crc32 takes at most UINT_MAX bytes per call).
uLong crc32_extend(uLong crc, const void* data, std::size_t bytes) {
  auto* p = static_cast<const Bytef*>(data);
  while (bytes > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(bytes, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    bytes -= chunk;
  }
  return crc;
}

std::uint32_t crc32_of(const void* data, std::size_t bytes) {
  return static_cast<std::uint32_t>(crc32_extend(crc32(0L, Z_NULL, 0), data, bytes));
}

// The one message of a dataset whose stored bytes do not match its checksum (`part`: which block,
// or "" for the whole dataset).
void require_checksum(const std::string& what, const std::string& path, const std::string& dataset,
                      std::int64_t expected, std::uint32_t got, const std::string& part = "") {
  require(static_cast<std::int64_t>(got) == expected, what, " file '", path, "': dataset '", dataset,
          "' fails its checksum (", part, "crc32 stored ", expected, ", computed ", got,
          "); the file is corrupt — restore it or write it again");
}

hid_t object_of(hid_t file, const std::string& object) {
  hid_t id = -1;
  H5E_BEGIN_TRY { id = H5Oopen(file, object.empty() ? "/" : object.c_str(), H5P_DEFAULT); }
  H5E_END_TRY;
  return id;
}

}  // namespace

H5File H5File::open_read(const std::string& path, const std::string& what) {
  require(std::filesystem::exists(path), what, " file '", path, "' does not exist");
  htri_t is_hdf5 = -1;
  H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(path.c_str()); }
  H5E_END_TRY;
  require(is_hdf5 > 0, what, " file '", path, "' is not an HDF5 file");
  hid_t id = -1;
  H5E_BEGIN_TRY { id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT); }
  H5E_END_TRY;
  require(id >= 0, "cannot open ", what, " file '", path, "'");
  return H5File(id, path, what);
}

H5File H5File::create(const std::string& path) {
  hid_t id = -1;
  H5E_BEGIN_TRY { id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
  H5E_END_TRY;
  require(id >= 0, "cannot create HDF5 file '", path, "'");
  return H5File(id, path, "output");
}

H5File::H5File(H5File&& other) noexcept : id_(other.id_), path_(std::move(other.path_)), what_(std::move(other.what_)) {
  other.id_ = -1;
}

H5File::~H5File() {
  if (id_ >= 0) H5Fclose(static_cast<hid_t>(id_));
}

bool H5File::has(const std::string& object) const {
  std::string prefix;
  std::size_t start = 0;
  while (start <= object.size()) {
    const std::size_t slash = object.find('/', start);
    prefix = object.substr(0, slash);
    htri_t exists = -1;
    H5E_BEGIN_TRY { exists = H5Lexists(static_cast<hid_t>(id_), prefix.c_str(), H5P_DEFAULT); }
    H5E_END_TRY;
    if (exists <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

std::vector<std::string> H5File::children(const std::string& group) const {
  std::vector<std::string> names;
  hid_t g = object_of(static_cast<hid_t>(id_), group);
  require(g >= 0, what_, " file '", path_, "': no group '", group, "'");
  Closer closer{g, H5Oclose};
  hsize_t index = 0;
  H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &index, collect, &names);
  std::sort(names.begin(), names.end());
  return names;
}

long long H5File::open_dataset(const std::string& dataset) const {
  require(has(dataset), what_, " file '", path_, "' has no dataset '", dataset, "'");
  hid_t id = -1;
  H5E_BEGIN_TRY { id = H5Dopen2(static_cast<hid_t>(id_), dataset.c_str(), H5P_DEFAULT); }
  H5E_END_TRY;
  require(id >= 0, what_, " file '", path_, "': '", dataset, "' is not a dataset");
  return id;
}

Shape H5File::shape(const std::string& dataset) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer space{H5Dget_space(d.id), H5Sclose};
  const int rank = H5Sget_simple_extent_ndims(space.id);
  require(rank >= 0, what_, " file '", path_, "': cannot read the shape of '", dataset, "'");
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.id, dims.data(), nullptr);
  return Shape(dims.begin(), dims.end());
}

bool H5File::is_real(const std::string& dataset) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer type{H5Dget_type(d.id), H5Tclose};
  return H5Tget_class(type.id) == H5T_FLOAT;
}

bool H5File::is_integer(const std::string& dataset) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer type{H5Dget_type(d.id), H5Tclose};
  return H5Tget_class(type.id) == H5T_INTEGER;
}

void H5File::read_checked(const std::string& dataset, long long memory_type, void* buffer, std::size_t count) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer stored{H5Dget_type(d.id), H5Tclose};
  herr_t status = -1;
  // The stored bytes as they are in the file (its own type as the memory type), to checksum them.
  H5E_BEGIN_TRY { status = H5Dread(d.id, stored.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer); }
  H5E_END_TRY;
  require(status >= 0, what_, " file '", path_, "': cannot read dataset '", dataset, "' (the file may be truncated)");
  if (const auto expected = int_attribute(dataset, kChecksum)) {
    require_checksum(what_, path_, dataset, *expected, crc32_of(buffer, count * H5Tget_size(stored.id)));
  }
  H5E_BEGIN_TRY { status = H5Tconvert(stored.id, static_cast<hid_t>(memory_type), count, buffer, nullptr, H5P_DEFAULT); }
  H5E_END_TRY;
  require(status >= 0, what_, " file '", path_, "': cannot convert dataset '", dataset, "'");
}

std::size_t H5File::stored_element_size(const std::string& dataset, long long stored_type, const char* kind) const {
  const std::size_t size = H5Tget_size(static_cast<hid_t>(stored_type));
  require(size <= 8, what_, " file '", path_, "': dataset '", dataset, "' holds ", size, "-byte ", kind,
          "; expected at most 8 bytes");
  return size;
}

std::vector<double> H5File::read_real(const std::string& dataset) const {
  require(is_real(dataset), what_, " file '", path_, "': dataset '", dataset, "' must hold floating-point values");
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape(dataset))));
  {
    Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
    Closer type{H5Dget_type(d.id), H5Tclose};
    stored_element_size(dataset, type.id, "reals");
  }
  read_checked(dataset, H5T_NATIVE_DOUBLE, values.data(), values.size());
  return values;
}

std::vector<std::int32_t> H5File::read_int32(const std::string& dataset) const {
  require(is_integer(dataset), what_, " file '", path_, "': dataset '", dataset, "' must hold integers (int32)");
  std::vector<std::int64_t> wide(static_cast<std::size_t>(shape_numel(shape(dataset))));
  {
    Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
    Closer type{H5Dget_type(d.id), H5Tclose};
    stored_element_size(dataset, type.id, "integers");
  }
  read_checked(dataset, H5T_NATIVE_INT64, wide.data(), wide.size());
  std::vector<std::int32_t> values(wide.size());
  for (std::size_t i = 0; i < wide.size(); ++i) {
    require(wide[i] >= INT32_MIN && wide[i] <= INT32_MAX, what_, " file '", path_, "': dataset '", dataset,
            "' holds ", wide[i], " at index ", i, ", outside int32");
    values[i] = static_cast<std::int32_t>(wide[i]);
  }
  return values;
}

std::vector<double> H5File::read_real_block(const std::string& dataset, std::int64_t row0, std::int64_t rows,
                                            std::int64_t col0, std::int64_t cols) const {
  require(is_real(dataset), what_, " file '", path_, "': dataset '", dataset, "' must hold floating-point values");
  const Shape dims = shape(dataset);
  require(dims.size() == 1 || dims.size() == 2, what_, " file '", path_, "': a block of '", dataset,
          "' needs a 1-D or 2-D dataset; it has shape ", shape_string(dims));
  const std::int64_t total_rows = dims.size() == 1 ? 1 : dims[0], total_cols = dims.back();
  require(row0 >= 0 && rows >= 0 && row0 + rows <= total_rows && col0 >= 0 && cols >= 0 && col0 + cols <= total_cols,
          what_, " file '", path_, "': block rows [", row0, ", ", row0 + rows, ") x columns [", col0, ", ", col0 + cols,
          ") lies outside dataset '", dataset, "' of shape ", shape_string(dims));
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  if (values.empty()) return values;
  if (has_tile_checksums(dataset)) {
    read_verified_block(dataset, dims, row0, rows, col0, cols, values.data());
    return values;
  }
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer file_space{H5Dget_space(d.id), H5Sclose};
  const hsize_t start2[2] = {static_cast<hsize_t>(row0), static_cast<hsize_t>(col0)};
  const hsize_t count2[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(cols)};
  const bool vector = dims.size() == 1;
  const hsize_t* start = vector ? start2 + 1 : start2;
  const hsize_t* count = vector ? count2 + 1 : count2;
  const int rank = vector ? 1 : 2;
  herr_t status = H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start, nullptr, count, nullptr);
  require(status >= 0, what_, " file '", path_, "': cannot select a block of dataset '", dataset, "'");
  Closer memory_space{H5Screate_simple(rank, count, nullptr), H5Sclose};
  H5E_BEGIN_TRY {
    status = H5Dread(d.id, H5T_NATIVE_DOUBLE, memory_space.id, file_space.id, H5P_DEFAULT, values.data());
  }
  H5E_END_TRY;
  require(status >= 0, what_, " file '", path_, "': cannot read a block of dataset '", dataset,
          "' (the file may be truncated)");
  return values;
}

void H5File::verify_checksum(const std::string& dataset, std::size_t slab_bytes) const {
  const auto expected = int_attribute(dataset, kChecksum);
  if (!expected) return;
  const Shape dims = shape(dataset);
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer stored{H5Dget_type(d.id), H5Tclose};
  Closer file_space{H5Dget_space(d.id), H5Sclose};
  const std::size_t element = H5Tget_size(stored.id);
  // Elements per index of the first dimension; slabs of whole indices (at least one).
  std::int64_t per_index = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) per_index *= dims[i];
  const std::int64_t first_extent = dims.empty() ? 1 : dims[0];
  const std::int64_t step =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(slab_bytes / std::max<std::size_t>(1, element * per_index)));
  std::vector<unsigned char> buffer;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (std::int64_t i0 = 0; i0 < first_extent; i0 += step) {
    const std::int64_t n = std::min(step, first_extent - i0);
    buffer.resize(static_cast<std::size_t>(n * per_index) * element);
    herr_t status = -1;
    if (dims.empty()) {
      H5E_BEGIN_TRY { status = H5Dread(d.id, stored.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()); }
      H5E_END_TRY;
    } else {
      std::vector<hsize_t> start(dims.size(), 0), count(dims.begin(), dims.end());
      start[0] = static_cast<hsize_t>(i0);
      count[0] = static_cast<hsize_t>(n);
      H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
      Closer memory_space{H5Screate_simple(static_cast<int>(dims.size()), count.data(), nullptr), H5Sclose};
      H5E_BEGIN_TRY { status = H5Dread(d.id, stored.id, memory_space.id, file_space.id, H5P_DEFAULT, buffer.data()); }
      H5E_END_TRY;
    }
    require(status >= 0, what_, " file '", path_, "': cannot read dataset '", dataset, "' (the file may be truncated)");
    crc = crc32_extend(crc, buffer.data(), buffer.size());
  }
  require_checksum(what_, path_, dataset, *expected, static_cast<std::uint32_t>(crc));
}

void H5File::read_verified_block(const std::string& dataset, const Shape& dims, std::int64_t row0, std::int64_t rows,
                                 std::int64_t col0, std::int64_t cols, double* out) const {
  const bool vector = dims.size() == 1;
  const std::vector<std::int64_t> tile_shape = int_list_attribute(dataset, kTileShape);
  const std::vector<std::int64_t> sums = int_list_attribute(dataset, kTileChecksums);
  Tiling t{dims[0], vector ? 1 : dims[1]};
  if (tile_shape.size() == 2) {
    t.tile_rows = tile_shape[0];
    t.tile_cols = tile_shape[1];
  }
  require(tile_shape.size() == 2 && t.tile_rows > 0 && t.tile_cols > 0 &&
              static_cast<std::int64_t>(sums.size()) == t.tiles_down() * t.tiles_across(),
          what_, " file '", path_, "': dataset '", dataset, "' has ", sums.size(), " tile checksums for tiles of ",
          tile_shape.size() == 2 ? std::to_string(t.tile_rows) + " x " + std::to_string(t.tile_cols) : "no shape");
  // The request as rows x columns of the tiling (a 1-D dataset's elements are its rows), and the
  // whole tiles that hold it: rows [r0, r1) x columns [c0, c1).
  const std::int64_t a = vector ? col0 : row0, b = vector ? col0 + cols : row0 + rows;
  const std::int64_t c = vector ? 0 : col0, e = vector ? 1 : col0 + cols;
  const std::int64_t first_down = a / t.tile_rows, last_down = (b - 1) / t.tile_rows;
  const std::int64_t first_across = c / t.tile_cols, last_across = (e - 1) / t.tile_cols;
  const std::int64_t r0 = first_down * t.tile_rows, r1 = std::min(t.rows, (last_down + 1) * t.tile_rows);
  const std::int64_t c0 = first_across * t.tile_cols, c1 = std::min(t.cols, (last_across + 1) * t.tile_cols);
  const std::int64_t width = c1 - c0;
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  Closer stored{H5Dget_type(d.id), H5Tclose};
  Closer file_space{H5Dget_space(d.id), H5Sclose};
  const std::size_t element = stored_element_size(dataset, stored.id, "reals");
  const auto count = static_cast<std::size_t>((r1 - r0) * width);
  std::vector<double> buffer(count);  // the stored bytes first, converted to double in place after
  const hsize_t start[2] = {static_cast<hsize_t>(r0), static_cast<hsize_t>(c0)};
  const hsize_t size[2] = {static_cast<hsize_t>(r1 - r0), static_cast<hsize_t>(width)};
  herr_t status = H5Sselect_hyperslab(file_space.id, H5S_SELECT_SET, start, nullptr, size, nullptr);
  require(status >= 0, what_, " file '", path_, "': cannot select a block of dataset '", dataset, "'");
  Closer memory_space{H5Screate_simple(vector ? 1 : 2, size, nullptr), H5Sclose};
  H5E_BEGIN_TRY { status = H5Dread(d.id, stored.id, memory_space.id, file_space.id, H5P_DEFAULT, buffer.data()); }
  H5E_END_TRY;
  require(status >= 0, what_, " file '", path_, "': cannot read a block of dataset '", dataset,
          "' (the file may be truncated)");
  const auto* bytes = reinterpret_cast<const unsigned char*>(buffer.data());
  for (std::int64_t i = first_down; i <= last_down; ++i)
    for (std::int64_t j = first_across; j <= last_across; ++j) {
      const std::int64_t tr0 = i * t.tile_rows, tr1 = std::min(t.rows, tr0 + t.tile_rows);
      const std::int64_t tc0 = j * t.tile_cols, tile_width = std::min(t.cols - tc0, t.tile_cols);
      uLong crc = crc32(0L, Z_NULL, 0);
      for (std::int64_t r = tr0; r < tr1; ++r)
        crc = crc32_extend(crc, bytes + static_cast<std::size_t>((r - r0) * width + (tc0 - c0)) * element,
                           static_cast<std::size_t>(tile_width) * element);
      require_checksum(what_, path_, dataset, sums[static_cast<std::size_t>(i * t.tiles_across() + j)],
                       static_cast<std::uint32_t>(crc),
                       "tile rows [" + std::to_string(tr0) + ", " + std::to_string(tr1) + ") x columns [" +
                           std::to_string(tc0) + ", " + std::to_string(tc0 + tile_width) + "): ");
    }
  H5E_BEGIN_TRY { status = H5Tconvert(stored.id, H5T_NATIVE_DOUBLE, count, buffer.data(), nullptr, H5P_DEFAULT); }
  H5E_END_TRY;
  require(status >= 0, what_, " file '", path_, "': cannot convert dataset '", dataset, "'");
  if (vector) {
    std::copy_n(buffer.data() + (col0 - r0), cols, out);
    return;
  }
  for (std::int64_t r = 0; r < rows; ++r)
    std::copy_n(buffer.data() + (row0 - r0 + r) * width + (col0 - c0), cols, out + r * cols);
}

bool H5File::has_tile_checksums(const std::string& dataset) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  return H5Aexists(d.id, kTileShape) > 0 && H5Aexists(d.id, kTileChecksums) > 0;
}

std::vector<std::int64_t> H5File::int_list_attribute(const std::string& object, const std::string& name) const {
  hid_t o = object_of(static_cast<hid_t>(id_), object);
  require(o >= 0, what_, " file '", path_, "': no object '", object, "'");
  Closer oc{o, H5Oclose};
  require(H5Aexists(o, name.c_str()) > 0, what_, " file '", path_, "': '", object, "' has no attribute '", name, "'");
  Closer attr{H5Aopen(o, name.c_str(), H5P_DEFAULT), H5Aclose};
  Closer type{H5Aget_type(attr.id), H5Tclose};
  Closer space{H5Aget_space(attr.id), H5Sclose};
  require(H5Tget_class(type.id) == H5T_INTEGER && H5Sget_simple_extent_ndims(space.id) == 1, what_, " file '", path_,
          "': attribute '", name, "' of '", object, "' must be a list of integers");
  std::vector<std::int64_t> values(static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.id)));
  require(H5Aread(attr.id, H5T_NATIVE_INT64, values.data()) >= 0, what_, " file '", path_,
          "': cannot read attribute '", name, "'");
  return values;
}

bool H5File::has_checksum(const std::string& dataset) const {
  Closer d{static_cast<hid_t>(open_dataset(dataset)), H5Dclose};
  return H5Aexists(d.id, kChecksum) > 0;
}

std::optional<std::string> H5File::string_attribute(const std::string& object, const std::string& name) const {
  hid_t o = object_of(static_cast<hid_t>(id_), object);
  if (o < 0) return std::nullopt;
  Closer oc{o, H5Oclose};
  if (H5Aexists(o, name.c_str()) <= 0) return std::nullopt;
  Closer attr{H5Aopen(o, name.c_str(), H5P_DEFAULT), H5Aclose};
  Closer type{H5Aget_type(attr.id), H5Tclose};
  require(H5Tget_class(type.id) == H5T_STRING && !H5Tis_variable_str(type.id), what_, " file '", path_,
          "': attribute '", name, "' of '", object.empty() ? "/" : object, "' must be a fixed-length string");
  std::string value(H5Tget_size(type.id), '\0');
  require(H5Aread(attr.id, type.id, value.data()) >= 0, what_, " file '", path_, "': cannot read attribute '", name,
          "'");
  value.resize(std::min(value.size(), value.find('\0')));
  return value;
}

// A scalar numeric attribute of `object` (nullopt when absent), which must be of class `expected`,
// read as `native`.
template <class T>
std::optional<T> H5File::numeric_attribute(const std::string& object, const std::string& name, int expected,
                                           std::int64_t native, const char* kind) const {
  hid_t o = object_of(static_cast<hid_t>(id_), object);
  if (o < 0) return std::nullopt;
  Closer oc{o, H5Oclose};
  if (H5Aexists(o, name.c_str()) <= 0) return std::nullopt;
  Closer attr{H5Aopen(o, name.c_str(), H5P_DEFAULT), H5Aclose};
  Closer type{H5Aget_type(attr.id), H5Tclose};
  require(H5Tget_class(type.id) == static_cast<H5T_class_t>(expected), what_, " file '", path_, "': attribute '", name,
          "' of '", object.empty() ? "/" : object, "' must be ", kind);
  T v{};
  require(H5Aread(attr.id, static_cast<hid_t>(native), &v) >= 0, what_, " file '", path_, "': cannot read attribute '",
          name, "'");
  return v;
}

std::optional<std::int64_t> H5File::int_attribute(const std::string& object, const std::string& name) const {
  return numeric_attribute<std::int64_t>(object, name, H5T_INTEGER, H5T_NATIVE_INT64, "an integer");
}

std::optional<double> H5File::real_attribute(const std::string& object, const std::string& name) const {
  return numeric_attribute<double>(object, name, H5T_FLOAT, H5T_NATIVE_DOUBLE, "a real number");
}

void H5File::create_group(const std::string& group) {
  Closer g{H5Gcreate2(static_cast<hid_t>(id_), group.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose};
  require(g.id >= 0, "HDF5 file '", path_, "': cannot create group '", group, "'");
}

namespace {

// `data` holds `bytes` bytes already in `file_type`'s layout (the host is little-endian, as the
// file types are), so the checksum is that of the bytes the file stores.
void write_dataset(hid_t file, const std::string& path, const std::string& dataset, const Shape& shape,
                   hid_t file_type, const void* data, std::size_t bytes) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Closer space{H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose};
  Closer d{H5Dcreate2(file, dataset.c_str(), file_type, space.id, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose};
  require(d.id >= 0, "HDF5 file '", path, "': cannot create dataset '", dataset, "'");
  require(H5Dwrite(d.id, file_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, "HDF5 file '", path,
          "': cannot write dataset '", dataset, "'");
  const std::int64_t crc = crc32_of(data, bytes);
  Closer aspace{H5Screate(H5S_SCALAR), H5Sclose};
  Closer attr{H5Acreate2(d.id, kChecksum, H5T_STD_I64LE, aspace.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  require(attr.id >= 0 && H5Awrite(attr.id, H5T_NATIVE_INT64, &crc) >= 0, "HDF5 file '", path,
          "': cannot write the checksum of dataset '", dataset, "'");
  if (shape.empty() || shape.size() > 2 || bytes == 0) return;
  // The same bytes again, tile by tile (row-major tiles; each tile's rows in order).
  const std::size_t element = H5Tget_size(file_type);
  const Tiling t = choose_tiling(shape, element);
  const auto* base = static_cast<const unsigned char*>(data);
  std::vector<std::int64_t> tiles;
  for (std::int64_t r0 = 0; r0 < t.rows; r0 += t.tile_rows)
    for (std::int64_t c0 = 0; c0 < t.cols; c0 += t.tile_cols) {
      const std::int64_t r1 = std::min(t.rows, r0 + t.tile_rows), width = std::min(t.cols - c0, t.tile_cols);
      uLong tile = crc32(0L, Z_NULL, 0);
      for (std::int64_t r = r0; r < r1; ++r)
        tile = crc32_extend(tile, base + static_cast<std::size_t>(r * t.cols + c0) * element,
                            static_cast<std::size_t>(width) * element);
      tiles.push_back(static_cast<std::int64_t>(tile));
    }
  const std::int64_t tile_shape[2] = {t.tile_rows, t.tile_cols};
  const hsize_t shape_count = 2, tile_count = tiles.size();
  Closer shape_space{H5Screate_simple(1, &shape_count, nullptr), H5Sclose};
  Closer tiles_space{H5Screate_simple(1, &tile_count, nullptr), H5Sclose};
  Closer shape_attr{H5Acreate2(d.id, kTileShape, H5T_STD_I64LE, shape_space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  Closer tiles_attr{H5Acreate2(d.id, kTileChecksums, H5T_STD_I64LE, tiles_space.id, H5P_DEFAULT, H5P_DEFAULT),
                    H5Aclose};
  require(shape_attr.id >= 0 && H5Awrite(shape_attr.id, H5T_NATIVE_INT64, tile_shape) >= 0 && tiles_attr.id >= 0 &&
              H5Awrite(tiles_attr.id, H5T_NATIVE_INT64, tiles.data()) >= 0,
          "HDF5 file '", path, "': cannot write the tile checksums of dataset '", dataset, "'");
}

void write_attribute(hid_t file, const std::string& path, const std::string& object, const std::string& name,
                     hid_t file_type, hid_t mem_type, const void* data) {
  hid_t o = object_of(file, object);
  require(o >= 0, "HDF5 file '", path, "': no object '", object, "' for attribute '", name, "'");
  Closer oc{o, H5Oclose};
  Closer space{H5Screate(H5S_SCALAR), H5Sclose};
  Closer attr{H5Acreate2(o, name.c_str(), file_type, space.id, H5P_DEFAULT, H5P_DEFAULT), H5Aclose};
  require(attr.id >= 0 && H5Awrite(attr.id, mem_type, data) >= 0, "HDF5 file '", path, "': cannot write attribute '",
          name, "'");
}

}  // namespace

void H5File::write_real(const std::string& dataset, const Shape& shape, const std::vector<double>& values,
                        DType storage) {
  require(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "write_real: ", values.size(),
          " values for shape ", shape_string(shape));
  require(storage == DType::f32 || storage == DType::f64, "write_real stores f32 or f64; got ", dtype_name(storage));
  if (storage == DType::f64) {
    write_dataset(static_cast<hid_t>(id_), path_, dataset, shape, H5T_IEEE_F64LE, values.data(),
                  values.size() * sizeof(double));
    return;
  }
  const std::vector<float> narrow(values.begin(), values.end());
  write_dataset(static_cast<hid_t>(id_), path_, dataset, shape, H5T_IEEE_F32LE, narrow.data(),
                narrow.size() * sizeof(float));
}

void H5File::write_int32(const std::string& dataset, const Shape& shape, const std::vector<std::int32_t>& values) {
  require(static_cast<std::int64_t>(values.size()) == shape_numel(shape), "write_int32: ", values.size(),
          " values for shape ", shape_string(shape));
  write_dataset(static_cast<hid_t>(id_), path_, dataset, shape, H5T_STD_I32LE, values.data(),
                values.size() * sizeof(std::int32_t));
}

void H5File::set_attribute(const std::string& object, const std::string& name, std::int64_t value) {
  write_attribute(static_cast<hid_t>(id_), path_, object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void H5File::set_attribute(const std::string& object, const std::string& name, double value) {
  write_attribute(static_cast<hid_t>(id_), path_, object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void H5File::set_attribute(const std::string& object, const std::string& name, const std::string& value) {
  Closer type{H5Tcopy(H5T_C_S1), H5Tclose};
  H5Tset_size(type.id, std::max<std::size_t>(1, value.size()));
  std::string padded = value.empty() ? std::string(1, '\0') : value;
  write_attribute(static_cast<hid_t>(id_), path_, object, name, type.id, type.id, padded.data());
}

void write_atomically(const std::string& path, const std::function<void(H5File&)>& write) {
  replace_file_atomically(path, [&](const std::string& temp) {
    H5File file = H5File::create(temp);
    write(file);
  });
}

}  // namespace mdtp
