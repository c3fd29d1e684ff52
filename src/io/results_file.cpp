#include "io/results_file.hpp"

#include <fmt/format.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"

namespace mdtp {
namespace {

// Owns one HDF5 identifier and closes it with the right function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t), const std::string& what) : id_(id), close_(close) {
    require(id_ >= 0, "HDF5: ", what, " failed");
  }
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void check(herr_t status, const std::string& what) { require(status >= 0, "HDF5: ", what, " failed"); }

void write_attribute(hid_t object, const std::string& name, const AttributeValue& value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose, "attribute space");
  if (const auto* s = std::get_if<std::string>(&value)) {
    Handle type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
    check(H5Tset_size(type.get(), std::max<std::size_t>(1, s->size())), "string size");
    check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "string charset");
    Handle attr(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                "creating attribute " + name);
    std::string padded = *s;
    if (padded.empty()) padded.push_back('\0');
    check(H5Awrite(attr.get(), type.get(), padded.data()), "writing attribute " + name);
  } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
    Handle attr(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                "creating attribute " + name);
    check(H5Awrite(attr.get(), H5T_NATIVE_INT64, i), "writing attribute " + name);
  } else {
    double d = std::get<double>(value);
    Handle attr(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                "creating attribute " + name);
    check(H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &d), "writing attribute " + name);
  }
}

void write_table(hid_t group, const std::string& name, const Table& table) {
  // Row-packed buffer matching a compound type with one member per column.
  std::vector<std::size_t> sizes, offsets;
  std::size_t row_bytes = 0;
  for (const auto& column : table.columns()) {
    std::size_t size = 8;
    if (const auto* s = std::get_if<std::vector<std::string>>(&column)) {
      size = 1;
      for (const auto& v : *s) size = std::max(size, v.size() + 1);
    }
    offsets.push_back(row_bytes);
    sizes.push_back(size);
    row_bytes += size;
  }
  require(row_bytes > 0, "table ", name, " has no columns");
  Handle type(H5Tcreate(H5T_COMPOUND, row_bytes), H5Tclose, "compound type");
  std::vector<std::unique_ptr<Handle>> string_types;
  for (std::size_t c = 0; c < table.columns().size(); ++c) {
    const auto& column = table.columns()[c];
    hid_t member;
    if (std::holds_alternative<std::vector<std::string>>(column)) {
      string_types.push_back(std::make_unique<Handle>(H5Tcopy(H5T_C_S1), H5Tclose, "string type"));
      check(H5Tset_size(string_types.back()->get(), sizes[c]), "string size");
      member = string_types.back()->get();
    } else if (std::holds_alternative<std::vector<std::int64_t>>(column)) {
      member = H5T_NATIVE_INT64;
    } else {
      member = H5T_NATIVE_DOUBLE;
    }
    check(H5Tinsert(type.get(), table.names()[c].c_str(), offsets[c], member), "compound member " + table.names()[c]);
  }
  const std::size_t rows = table.rows();
  std::vector<char> buffer(std::max<std::size_t>(1, rows) * row_bytes, 0);
  for (std::size_t c = 0; c < table.columns().size(); ++c) {
    std::visit(
        [&](const auto& values) {
          using V = typename std::decay_t<decltype(values)>::value_type;
          for (std::size_t r = 0; r < rows; ++r) {
            char* dst = buffer.data() + r * row_bytes + offsets[c];
            if constexpr (std::is_same_v<V, std::string>) std::memcpy(dst, values[r].data(), values[r].size());
            else std::memcpy(dst, &values[r], sizeof(V));
          }
        },
        table.columns()[c]);
  }
  hsize_t dims[1] = {rows};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose, "dataspace");
  Handle dataset(H5Dcreate2(group, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                 H5Dclose, "creating dataset " + name);
  if (rows > 0) check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), "writing " + name);
}

herr_t collect_name(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

hid_t open_existing(const std::string& path, unsigned flags) {
  htri_t is_hdf5 = -1;
  H5E_BEGIN_TRY { is_hdf5 = H5Fis_hdf5(path.c_str()); }
  H5E_END_TRY;
  require(is_hdf5 > 0, "'", path, "' exists but is not an HDF5 file; refusing to touch it (choose another --out)");
  hid_t file = -1;
  H5E_BEGIN_TRY { file = H5Fopen(path.c_str(), flags, H5P_DEFAULT); }
  H5E_END_TRY;
  require(file >= 0, "cannot open HDF5 file '", path, "'");
  return file;
}

// Writes /runs/<next number>-<kind> into the open file `file`; returns its path.
std::string append_to(hid_t file, const std::string& kind, const Attributes& attributes,
                      const std::map<std::string, Table>& tables) {
  htri_t has_runs = H5Lexists(file, "runs", H5P_DEFAULT);
  if (has_runs <= 0) {
    Handle g(H5Gcreate2(file, "runs", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose, "creating /runs");
  }
  std::vector<std::string> existing;
  {
    Handle runs(H5Gopen2(file, "runs", H5P_DEFAULT), H5Gclose, "opening /runs");
    hsize_t index = 0;
    check(H5Literate(runs.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &existing), "listing /runs");
  }
  int next = 1;
  for (const auto& name : existing) next = std::max(next, std::atoi(name.c_str()) + 1);
  const std::string group_path = fmt::format("/runs/{:04}-{}", next, kind);
  Handle group(H5Gcreate2(file, group_path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose,
               "creating " + group_path);
  for (const auto& [name, value] : attributes) write_attribute(group.get(), name, value);
  for (const auto& [name, table] : tables) write_table(group.get(), name, table);
  return group_path;
}

}  // namespace

ResultsFile::ResultsFile(const std::string& path) : path_(path) {
  // Checked now, written only by append_run: an existing file must be HDF5 (never replaced).
  if (std::filesystem::exists(path)) {
    Handle probe(open_existing(path, H5F_ACC_RDONLY), H5Fclose, "open");
  } else if (auto parent = std::filesystem::path(path).parent_path(); !parent.empty()) {
    std::filesystem::create_directories(parent);
  }
}

ResultsFile::~ResultsFile() = default;

// Appending in place would leave a file that a kill or a full disk interrupted half-way with its
// earlier runs unreadable (HDF5 keeps no journal).  So the run is appended to a copy, which is
// renamed over the file only once complete and closed: the file always holds either the earlier
// runs or all of them.  Results files are small (tables of a few thousand rows), so the copy is
// cheap beside the run it records.
std::string ResultsFile::append_run(const std::string& kind, const Attributes& attributes,
                                    const std::map<std::string, Table>& tables) {
  std::string group_path;
  replace_file_atomically(path_, [&](const std::string& temp) {
    hid_t opened = -1;
    if (std::filesystem::exists(path_)) {
      Handle probe(open_existing(path_, H5F_ACC_RDONLY), H5Fclose, "open");  // still HDF5
      std::filesystem::copy_file(path_, temp, std::filesystem::copy_options::overwrite_existing);
      opened = open_existing(temp, H5F_ACC_RDWR);
    } else {
      H5E_BEGIN_TRY { opened = H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
      H5E_END_TRY;
      require(opened >= 0, "cannot create HDF5 file '", temp, "' (next to '", path_, "')");
    }
    Handle file(opened, H5Fclose, "open");
    group_path = append_to(file.get(), kind, attributes, tables);
    check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "flushing " + temp);
  });
  return group_path;
}

std::vector<std::string> list_runs(const std::string& path) {
  std::vector<std::string> names;
  hid_t file = open_existing(path, H5F_ACC_RDONLY);
  Handle owner(file, H5Fclose, "open");
  if (H5Lexists(file, "runs", H5P_DEFAULT) <= 0) return names;
  Handle runs(H5Gopen2(file, "runs", H5P_DEFAULT), H5Gclose, "opening /runs");
  hsize_t index = 0;
  check(H5Literate(runs.get(), H5_INDEX_NAME, H5_ITER_INC, &index, collect_name, &names), "listing /runs");
  return names;
}

Table read_table(const std::string& path, const std::string& dataset_path) {
  Handle file(open_existing(path, H5F_ACC_RDONLY), H5Fclose, "open");
  Handle dataset(H5Dopen2(file.get(), dataset_path.c_str(), H5P_DEFAULT), H5Dclose, "opening " + dataset_path);
  Handle type(H5Dget_type(dataset.get()), H5Tclose, "dataset type");
  Handle space(H5Dget_space(dataset.get()), H5Sclose, "dataset space");
  hsize_t rows = 0;
  H5Sget_simple_extent_dims(space.get(), &rows, nullptr);
  Table table;
  const int members = H5Tget_nmembers(type.get());
  std::vector<Table::Column> data;
  for (int m = 0; m < members; ++m) {
    char* raw_name = H5Tget_member_name(type.get(), static_cast<unsigned>(m));
    std::string name = raw_name;
    H5free_memory(raw_name);
    H5T_class_t cls = H5Tget_member_class(type.get(), static_cast<unsigned>(m));
    if (cls == H5T_STRING) {
      Handle member_type(H5Tget_member_type(type.get(), static_cast<unsigned>(m)), H5Tclose, "member type");
      std::size_t width = H5Tget_size(member_type.get());
      Handle string_type(H5Tcopy(H5T_C_S1), H5Tclose, "string type");
      H5Tset_size(string_type.get(), width);
      Handle mem(H5Tcreate(H5T_COMPOUND, width), H5Tclose, "read type");
      H5Tinsert(mem.get(), name.c_str(), 0, string_type.get());
      std::vector<char> buf(std::max<hsize_t>(1, rows) * width);
      if (rows) check(H5Dread(dataset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "reading " + name);
      std::vector<std::string> values;
      for (hsize_t r = 0; r < rows; ++r) values.emplace_back(buf.data() + r * width, strnlen(buf.data() + r * width, width));
      table.text(name);
      data.emplace_back(std::move(values));
    } else {
      const bool integer = cls == H5T_INTEGER;
      Handle mem(H5Tcreate(H5T_COMPOUND, 8), H5Tclose, "read type");
      H5Tinsert(mem.get(), name.c_str(), 0, integer ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE);
      std::vector<char> buf(std::max<hsize_t>(1, rows) * 8);
      if (rows) check(H5Dread(dataset.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), "reading " + name);
      if (integer) {
        std::vector<std::int64_t> values(rows);
        if (rows) std::memcpy(values.data(), buf.data(), rows * 8);  // an empty vector's data() may be null
        table.integer(name);
        data.emplace_back(std::move(values));
      } else {
        std::vector<double> values(rows);
        if (rows) std::memcpy(values.data(), buf.data(), rows * 8);
        table.real(name);
        data.emplace_back(std::move(values));
      }
    }
  }
  // Rebuild row by row (keeps Table's invariant checks in one place).
  for (hsize_t r = 0; r < rows; ++r) {
    auto builder = table.row();
    for (const auto& column : data)
      std::visit([&](const auto& v) { builder(v[r]); }, column);
  }
  return table;
}

Attributes read_attributes(const std::string& path, const std::string& group_path) {
  Handle file(open_existing(path, H5F_ACC_RDONLY), H5Fclose, "open");
  Handle group(H5Gopen2(file.get(), group_path.c_str(), H5P_DEFAULT), H5Gclose, "opening " + group_path);
  Attributes out;
  H5O_info_t info;
  check(H5Oget_info2(group.get(), &info, H5O_INFO_NUM_ATTRS), "group info");
  for (hsize_t i = 0; i < info.num_attrs; ++i) {
    Handle attr(H5Aopen_by_idx(group.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, H5P_DEFAULT, H5P_DEFAULT), H5Aclose,
                "attribute");
    char name[256];
    H5Aget_name(attr.get(), sizeof name, name);
    Handle type(H5Aget_type(attr.get()), H5Tclose, "attribute type");
    switch (H5Tget_class(type.get())) {
      case H5T_STRING: {
        std::string value(H5Tget_size(type.get()), '\0');
        check(H5Aread(attr.get(), type.get(), value.data()), "reading attribute");
        value.resize(strnlen(value.data(), value.size()));
        out[name] = value;
        break;
      }
      case H5T_INTEGER: {
        std::int64_t v = 0;
        check(H5Aread(attr.get(), H5T_NATIVE_INT64, &v), "reading attribute");
        out[name] = v;
        break;
      }
      default: {
        double v = 0;
        check(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &v), "reading attribute");
        out[name] = v;
      }
    }
  }
  return out;
}

}  // namespace mdtp
