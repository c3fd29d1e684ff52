#include "io/safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <bit>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/convert.hpp"
#include "core/error.hpp"

namespace mdtp {

// The data buffer is little-endian and convert_host reads host-order elements; a big-endian host
// would need a byte swap that nothing here does.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Hugging Face's reader refuses larger headers (a guard against a corrupt length making it
// allocate gigabytes); a file it refuses should not pass here.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();

struct FormatDtype {
  const char* name;
  int bits;  // the 4- and 6-bit floats are packed, so sizes are counted in bits
  std::optional<DType> dtype;
};

// The format's dtypes (the safetensors crate's Dtype, the 8-bit and narrower floats included).
const FormatDtype kFormatDtypes[] = {
    {"BOOL", 8, std::nullopt},     {"F4", 4, std::nullopt},       {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},  {"U8", 8, std::nullopt},       {"I8", 8, std::nullopt},
    {"F8_E5M2", 8, std::nullopt},  {"F8_E4M3", 8, std::nullopt},  {"F8_E8M0", 8, std::nullopt},
    {"I16", 16, std::nullopt},     {"U16", 16, std::nullopt},     {"F16", 16, DType::f16},
    {"BF16", 16, DType::bf16},     {"I32", 32, std::nullopt},     {"U32", 32, std::nullopt},
    {"F32", 32, DType::f32},       {"C64", 64, std::nullopt},     {"F64", 64, DType::f64},
    {"I64", 64, std::nullopt},     {"U64", 64, std::nullopt},
};

const FormatDtype* find_format_dtype(const std::string& name) {
  for (const auto& d : kFormatDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string format_dtype_list() {
  std::string out;
  for (const auto& d : kFormatDtypes) out += (out.empty() ? "" : ", ") + std::string(d.name);
  return out;
}

// A refusal is one line even when a name in the file holds a line break: control characters are
// spelled out.
template <class... Parts>
std::string one_line(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  std::string out;
  for (char c : os.str()) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else {
      static const char digits[] = "0123456789abcdef";
      out += c == '\n' ? std::string("\\n") : std::string("\\x") + digits[u >> 4] + digits[u & 15];
    }
  }
  return out;
}

template <class... Parts>
[[noreturn]] void file_error(const std::string& path, const Parts&... parts) {
  throw_error(one_line("safetensors file '", path, "': ", parts...));
}

template <class... Parts>
[[noreturn]] void index_error(const std::string& path, const Parts&... parts) {
  throw_error(one_line("safetensors index '", path, "': ", parts...));
}

template <class... Parts>
[[noreturn]] void writer_error(const std::string& path, const Parts&... parts) {
  throw_error(one_line("writing safetensors file '", path, "': ", parts...));
}

// "[begin, end)" for a byte range, "[begin, end]" for the header's data_offsets.  (Built by
// appending: GCC 12 warns falsely (-Wrestrict) about "[" + std::string.)
std::string pair_text(std::int64_t begin, std::int64_t end, char close) {
  std::string out(1, '[');
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += close;
  return out;
}

std::string range_text(std::int64_t begin, std::int64_t end) { return pair_text(begin, end, ')'); }

// A JSON value as it appears in the header, for messages.
std::string json_text(const json& value) { return value.dump(); }

// A non-negative integer that fits int64 (JSON keeps 3.0 a float, which is not accepted).
std::optional<std::int64_t> as_count(const json& value) {
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    if (u <= static_cast<std::uint64_t>(kMaxInt64)) return static_cast<std::int64_t>(u);
    return std::nullopt;
  }
  if (value.is_number_integer()) {
    const auto s = value.get<std::int64_t>();
    if (s >= 0) return s;
  }
  return std::nullopt;
}

// Elements of a shape whose byte count has been checked (byte_count): an extent of 0 anywhere
// makes it empty even where the other extents' product would overflow.
std::size_t element_count(const Shape& shape) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  return static_cast<std::size_t>(shape_numel(shape));
}

// numel · bits / 8, or nothing when the count overflows int64 or is not a whole number of bytes.
std::optional<std::int64_t> byte_count(const Shape& shape, int bits, bool* whole_bytes) {
  *whole_bytes = true;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t bit_count = bits;
  for (std::int64_t d : shape)
    if (__builtin_mul_overflow(bit_count, d, &bit_count)) return std::nullopt;
  *whole_bytes = bit_count % 8 == 0;
  if (!*whole_bytes) return std::nullopt;
  return bit_count / 8;
}

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

struct ParsedEntry {
  SafetensorsEntry entry;
  int bits = 0;
};

ParsedEntry parse_entry(const std::string& path, const std::string& name, const json& value) {
  if (!value.is_object()) file_error(path, "tensor '", name, "': entry is not an object (got ", json_text(value), ")");
  for (const auto& [key, unused] : value.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      file_error(path, "tensor '", name, "': unexpected key '", key, "' (an entry holds dtype, shape and data_offsets only)");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key)) file_error(path, "tensor '", name, "': no '", key, "'");

  ParsedEntry parsed;
  SafetensorsEntry& e = parsed.entry;
  e.name = name;
  const json& dtype = value.at("dtype");
  if (!dtype.is_string()) file_error(path, "tensor '", name, "': dtype ", json_text(dtype), " is not a string");
  e.dtype_name = dtype.get<std::string>();
  const FormatDtype* format = find_format_dtype(e.dtype_name);
  if (format == nullptr)
    file_error(path, "tensor '", name, "': unknown dtype '", e.dtype_name, "' (the format's dtypes are ",
               format_dtype_list(), ")");
  e.dtype = format->dtype;
  parsed.bits = format->bits;

  const json& shape = value.at("shape");
  bool shape_ok = shape.is_array();
  if (shape_ok) {
    for (const json& d : shape) {
      const auto extent = as_count(d);
      if (!extent) {
        shape_ok = false;
        break;
      }
      e.shape.push_back(*extent);
    }
  }
  if (!shape_ok) file_error(path, "tensor '", name, "': shape ", json_text(shape), " is not an array of non-negative integers");

  const json& offsets = value.at("data_offsets");
  std::optional<std::int64_t> begin, end;
  if (offsets.is_array() && offsets.size() == 2) {
    begin = as_count(offsets[0]);
    end = as_count(offsets[1]);
  }
  if (!begin || !end)
    file_error(path, "tensor '", name, "': data_offsets ", json_text(offsets), " is not two non-negative integers");
  e.begin = *begin;
  e.end = *end;
  return parsed;
}

// The byte ranges, sorted by where they start, must cover [0, data_size) exactly once: anything
// else is a corrupt file, whatever a lenient reader would make of it.
void check_tiling(const std::string& path, const std::vector<SafetensorsEntry>& sorted, std::int64_t data_size) {
  std::int64_t covered = 0;
  const SafetensorsEntry* previous = nullptr;  // the entry that ends at `covered`
  for (const SafetensorsEntry& e : sorted) {
    if (e.begin < covered)
      file_error(path, "tensor '", e.name, "' at bytes ", range_text(e.begin, e.end), " overlaps tensor '",
                 previous->name, "' at bytes ", range_text(previous->begin, previous->end));
    if (e.begin > covered) {
      if (previous == nullptr)
        file_error(path, "bytes ", range_text(covered, e.begin), " of the data buffer belong to no tensor (a hole before the first tensor '",
                   e.name, "')");
      file_error(path, "bytes ", range_text(covered, e.begin), " of the data buffer belong to no tensor (a hole between tensor '",
                 previous->name, "' and tensor '", e.name, "')");
    }
    covered = e.end;
    previous = &e;
  }
  if (covered < data_size) {
    if (previous == nullptr)
      file_error(path, "bytes ", range_text(covered, data_size), " of the data buffer belong to no tensor (the header names none)");
    file_error(path, "bytes ", range_text(covered, data_size), " of the data buffer belong to no tensor (after the last tensor '",
               previous->name, "')");
  }
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
  }
  throw_error("safetensors_dtype_name: unknown dtype code ", static_cast<int>(dtype));
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  const auto status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) file_error(path, "cannot open it (no such file)");
  if (ec) file_error(path, "cannot open it (", ec.message(), ")");
  if (!fs::is_regular_file(status)) file_error(path, "is not a regular file");
  const std::uint64_t file_size = fs::file_size(path, ec);
  if (ec) file_error(path, "cannot read its size (", ec.message(), ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) file_error(path, "cannot open it for reading");

  if (file_size < 8) file_error(path, "the file is ", file_size, " bytes, shorter than the 8-byte header length");
  unsigned char length_bytes[8];
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  if (!in) file_error(path, "cannot read the header length");
  const std::uint64_t header_length = read_le64(length_bytes);
  if (header_length == 0) file_error(path, "header length is 0");
  if (header_length > kMaxHeaderBytes)
    file_error(path, "header length ", header_length, " exceeds the limit of ", kMaxHeaderBytes, " bytes");
  if (header_length > file_size - 8)
    file_error(path, "header length ", header_length, " runs past the end of the file (", file_size,
               " bytes leave ", file_size - 8, " after the length)");

  std::string header(header_length, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_length));
  if (!in) file_error(path, "cannot read the ", header_length, "-byte header");

  // A JSON object keeps one value per key, so a name given twice would hide a tensor; the parser
  // reports every top-level key to find that.
  std::set<std::string> seen;
  std::string repeated;
  const json::parser_callback_t note_keys = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second &&
        repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  json doc;
  try {
    doc = json::parse(header, note_keys);
  } catch (const json::exception& e) {
    file_error(path, "header is not valid JSON (", e.what(), ")");
  }
  if (!doc.is_object()) file_error(path, "header is not a JSON object (it is ", doc.type_name(), ")");
  if (!repeated.empty()) file_error(path, "'", repeated, "' appears twice in the header");

  SafetensorsFile file;
  file.path_ = path;
  file.data_start_ = static_cast<std::int64_t>(8 + header_length);
  const std::int64_t data_size = static_cast<std::int64_t>(file_size - 8 - header_length);
  std::vector<ParsedEntry> parsed;
  for (const auto& [key, value] : doc.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) file_error(path, "__metadata__ is not an object of strings (got ", json_text(value), ")");
      for (const auto& [field, text] : value.items()) {
        if (!text.is_string())
          file_error(path, "__metadata__ field '", field, "' is not a string (got ", json_text(text), ")");
        file.metadata_[field] = text.get<std::string>();
      }
      continue;
    }
    parsed.push_back(parse_entry(path, key, value));
  }

  for (const ParsedEntry& p : parsed) {
    const SafetensorsEntry& e = p.entry;
    const std::string offsets = pair_text(e.begin, e.end, ']');
    if (e.begin > e.end) file_error(path, "tensor '", e.name, "': data_offsets ", offsets, " end before they begin");
    if (e.end > data_size)
      file_error(path, "tensor '", e.name, "': data_offsets ", offsets, " run past the end of the ", data_size,
                 "-byte data buffer");
    bool whole_bytes = true;
    const auto needed = byte_count(e.shape, p.bits, &whole_bytes);
    if (!whole_bytes)
      file_error(path, "tensor '", e.name, "': shape ", shape_string(e.shape), " of ", e.dtype_name,
                 " is not a whole number of bytes");
    if (!needed)
      file_error(path, "tensor '", e.name, "': shape ", shape_string(e.shape), " of ", e.dtype_name,
                 " has more bytes than a 64-bit count holds");
    if (e.end - e.begin != *needed)
      file_error(path, "tensor '", e.name, "': data_offsets ", offsets, " hold ", e.end - e.begin, " bytes but shape ",
                 shape_string(e.shape), " of ", e.dtype_name, " needs ", *needed);
    file.entries_.push_back(e);
  }
  std::sort(file.entries_.begin(), file.entries_.end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  check_tiling(path, file.entries_, data_size);
  for (std::size_t i = 0; i < file.entries_.size(); ++i) file.by_name_[file.entries_[i].name] = i;
  return file;
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) file_error(path_, "no tensor '", name, "'");
  return entries_[it->second];
}

std::vector<double> SafetensorsFile::read(const std::string& name) const {
  const SafetensorsEntry& e = entry(name);
  if (!e.dtype) file_error(path_, "tensor '", name, "' has dtype ", e.dtype_name, "; mdtp reads F32, F64, BF16 and F16");
  const std::size_t count = element_count(e.shape);
  std::vector<double> values(count);
  if (count == 0) return values;
  const auto bytes = static_cast<std::size_t>(e.end - e.begin);
  std::vector<unsigned char> raw(bytes);
  std::ifstream in(path_, std::ios::binary);
  if (!in) file_error(path_, "cannot open it to read tensor '", name, "'");
  in.seekg(data_start_ + e.begin);
  in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(bytes));
  if (static_cast<std::size_t>(in.gcount()) != bytes)
    file_error(path_, "tensor '", name, "': read ", in.gcount(), " of its ", bytes,
               " bytes (has the file changed since it was opened?)");
  convert_host(*e.dtype, raw.data(), DType::f64, values.data(), count);
  return values;
}

SafetensorsCollection SafetensorsCollection::open(const std::string& path) {
  SafetensorsCollection collection;
  collection.path_ = path;
  if (fs::path(path).extension() != ".json") {
    collection.shards_.push_back(SafetensorsFile::open(path));
    for (const auto& e : collection.shards_.front().entries()) collection.shard_of_[e.name] = 0;
    collection.metadata_ = collection.shards_.front().metadata();
    return collection;
  }

  std::ifstream in(path, std::ios::binary);
  if (!in) index_error(path, "cannot open it");
  std::ostringstream text;
  text << in.rdbuf();
  json doc;
  try {
    doc = json::parse(text.str());
  } catch (const json::exception& e) {
    index_error(path, "not valid JSON (", e.what(), ")");
  }
  if (!doc.is_object()) index_error(path, "not a JSON object (it is ", doc.type_name(), ")");
  if (!doc.contains("weight_map") || !doc.at("weight_map").is_object()) index_error(path, "no \"weight_map\" object");
  if (doc.contains("metadata")) {
    const json& metadata = doc.at("metadata");
    if (!metadata.is_object()) index_error(path, "\"metadata\" is not an object (got ", json_text(metadata), ")");
    for (const auto& [field, value] : metadata.items())
      collection.metadata_[field] = value.is_string() ? value.get<std::string>() : json_text(value);
  }

  std::map<std::string, std::vector<std::string>> listed;  // shard file name -> its tensors
  std::map<std::string, std::string> weight_map;
  for (const auto& [name, shard] : doc.at("weight_map").items()) {
    if (!shard.is_string() || shard.get<std::string>().empty())
      index_error(path, "weight_map entry of tensor '", name, "' is not a file name (got ", json_text(shard), ")");
    const std::string file = shard.get<std::string>();
    if (fs::path(file).is_absolute())
      index_error(path, "weight_map puts tensor '", name, "' in shard '", file,
                  "', an absolute path (shards are named relative to the index's directory)");
    listed[file].push_back(name);
    weight_map[name] = file;
  }

  const fs::path directory = fs::path(path).parent_path();
  for (const auto& [shard, names] : listed) {
    SafetensorsFile file = SafetensorsFile::open((directory / shard).string());
    for (const std::string& name : names)
      if (!file.has(name))
        index_error(path, "weight_map puts tensor '", name, "' in shard '", shard, "', but '", file.path(),
                    "' has no such tensor");
    for (const SafetensorsEntry& e : file.entries()) {
      const auto it = weight_map.find(e.name);
      if (it == weight_map.end())
        index_error(path, "shard '", shard, "' holds tensor '", e.name, "', which weight_map does not list");
      if (it->second != shard)
        index_error(path, "shard '", shard, "' holds tensor '", e.name, "', which weight_map puts in shard '", it->second, "'");
    }
    for (const std::string& name : names) collection.shard_of_[name] = collection.shards_.size();
    collection.shards_.push_back(std::move(file));
  }
  return collection;
}

std::vector<std::string> SafetensorsCollection::names() const {
  std::vector<std::string> out;
  out.reserve(shard_of_.size());
  for (const auto& [name, unused] : shard_of_) out.push_back(name);
  return out;
}

std::size_t SafetensorsCollection::shard_index(const std::string& name) const {
  const auto it = shard_of_.find(name);
  if (it == shard_of_.end()) throw_error(one_line("safetensors checkpoint '", path_, "': no tensor '", name, "'"));
  return it->second;
}

const SafetensorsEntry& SafetensorsCollection::entry(const std::string& name) const {
  return shards_[shard_index(name)].entry(name);
}

std::vector<double> SafetensorsCollection::read(const std::string& name) const {
  return shards_[shard_index(name)].read(name);
}

const std::string& SafetensorsCollection::file_of(const std::string& name) const {
  return shards_[shard_index(name)].path();
}

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::vector<SafetensorsEntrySpec> layout,
                                     const std::map<std::string, std::string>& metadata)
    : path_(path), layout_(std::move(layout)) {
  // The whole header is settled before anything touches the disk, so a refused layout leaves no
  // trace.  __metadata__ first, then the tensors in layout order, as Hugging Face writes them.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& fields = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [field, text] : metadata) fields[field] = text;
  }
  std::int64_t offset = 0;
  for (const SafetensorsEntrySpec& spec : layout_) {
    if (spec.name == "__metadata__") writer_error(path_, "a tensor may not be named '__metadata__'");
    if (header.contains(spec.name)) writer_error(path_, "tensor '", spec.name, "' appears twice in the layout");
    for (std::int64_t d : spec.shape)
      if (d < 0) writer_error(path_, "tensor '", spec.name, "': shape ", shape_string(spec.shape), " has a negative extent");
    bool whole_bytes = true;
    const auto bytes = byte_count(spec.shape, static_cast<int>(8 * dtype_size(spec.dtype)), &whole_bytes);
    if (!bytes || kMaxInt64 - offset < *bytes)
      writer_error(path_, "tensor '", spec.name, "': shape ", shape_string(spec.shape), " makes the file larger than 2^63 bytes");
    header[spec.name] = {{"dtype", safetensors_dtype_name(spec.dtype)},
                         {"shape", spec.shape},
                         {"data_offsets", {offset, offset + *bytes}}};
    offsets_.push_back(offset);
    offset += *bytes;
  }
  written_.assign(layout_.size(), false);
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::ordered_json::exception& e) {
    writer_error(path_, "a tensor name or metadata field is not valid UTF-8 (", e.what(), ")");
  }
  // Spaces (valid JSON) pad the header so that the data buffer starts 8-byte aligned, as Hugging
  // Face's writer does: a reader that maps the file can then use f64 tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  for (std::int64_t& o : offsets_) o += 8 + static_cast<std::int64_t>(text.size());  // file positions

  const fs::path target(path_);
  if (!target.parent_path().empty()) {
    std::error_code ignored;
    fs::create_directories(target.parent_path(), ignored);
  }
  // The process id keeps ranks apart, the writer's address two live writers of one process.
  temp_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
          std::to_string(reinterpret_cast<std::uintptr_t>(this));
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) writer_error(path_, "cannot create the temporary file '", temp_, "'");
  unsigned char length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  out_.write(reinterpret_cast<const char*>(length_bytes), 8);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out_) {
    discard();
    writer_error(path_, "cannot write the header to '", temp_, "'");
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (!done_) discard();
}

void SafetensorsWriter::discard() {
  if (out_.is_open()) out_.close();
  std::error_code ignored;
  fs::remove(temp_, ignored);
  done_ = true;
}

void SafetensorsWriter::write_next(const std::string& name, const std::vector<double>& values) {
  if (done_) writer_error(path_, "tensor '", name, "' given after finish() or a failed write");
  if (next_ == layout_.size())
    writer_error(path_, "tensor '", name, "' given after all ", layout_.size(), " tensors of the layout");
  // The first tensor not written yet, so that write() before it does no harm.
  const auto index = static_cast<std::size_t>(std::find(written_.begin(), written_.end(), false) - written_.begin());
  const SafetensorsEntrySpec& spec = layout_[index];
  if (name != spec.name)
    writer_error(path_, "tensor '", name, "' given out of order: the layout's next tensor (", index + 1, " of ",
                 layout_.size(), ") is '", spec.name, "'");
  write_at(index, values);
}

void SafetensorsWriter::write(const std::string& name, const std::vector<double>& values) {
  if (done_) writer_error(path_, "tensor '", name, "' given after finish() or a failed write");
  std::size_t index = layout_.size();
  for (std::size_t i = 0; i < layout_.size() && index == layout_.size(); ++i)
    if (layout_[i].name == name) index = i;
  if (index == layout_.size()) writer_error(path_, "tensor '", name, "' is not in the layout");
  if (written_[index]) writer_error(path_, "tensor '", name, "' given twice");
  write_at(index, values);
}

void SafetensorsWriter::write_at(std::size_t index, const std::vector<double>& values) {
  const SafetensorsEntrySpec& spec = layout_[index];
  const std::string& name = spec.name;
  const std::size_t count = element_count(spec.shape);
  if (values.size() != count)
    writer_error(path_, "tensor '", name, "' has shape ", shape_string(spec.shape), " (", count, " elements) but ",
                 values.size(), " values were given");
  out_.seekp(offsets_[index]);  // its place: write() may come in any order
  // In chunks, so that writing a large tensor never holds a second copy of it.
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  const std::size_t size = dtype_size(spec.dtype);
  std::vector<unsigned char> buffer(std::min(count, kChunk) * size);
  for (std::size_t i = 0; i < count; i += kChunk) {
    const std::size_t n = std::min(kChunk, count - i);
    convert_host(DType::f64, values.data() + i, spec.dtype, buffer.data(), n);
    out_.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(n * size));
  }
  if (!out_) {
    discard();
    writer_error(path_, "cannot write tensor '", name, "' to '", temp_, "'");
  }
  written_[index] = true;
  ++next_;
}

void SafetensorsWriter::finish() {
  if (done_) writer_error(path_, "finish() after finish() or a failed write");
  if (next_ != layout_.size()) {
    const auto missing = std::find(written_.begin(), written_.end(), false) - written_.begin();
    writer_error(path_, "finish() after ", next_, " of ", layout_.size(), " tensors; tensor '",
                 layout_[static_cast<std::size_t>(missing)].name, "' was not written");
  }
  out_.close();
  if (!out_) {
    discard();
    writer_error(path_, "cannot finish writing '", temp_, "'");
  }
  std::error_code ec;
  fs::rename(temp_, path_, ec);
  if (ec) {
    discard();
    writer_error(path_, "cannot move '", temp_, "' into place: ", ec.message());
  }
  done_ = true;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsEntrySpec> layout;
  layout.reserve(tensors.size());
  for (const SafetensorsTensor& t : tensors) layout.push_back({t.name, t.shape, t.dtype});
  SafetensorsWriter writer(path, std::move(layout), metadata);
  for (const SafetensorsTensor& t : tensors) writer.write_next(t.name, t.values);
  writer.finish();
}

}  // namespace mdtp
