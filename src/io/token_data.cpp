#include "io/token_data.hpp"


#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/data_files.hpp"
#include "core/error.hpp"
#include "io/h5_file.hpp"

namespace mdtp {

TokenData read_token_file(const std::string& path) {
  H5File file = H5File::open_read(path, "token data");
  TokenData data;
  data.source = path;
  for (const char* name : {"inputs", "targets"}) {
    require(file.has(name), "token data file '", path, "' has no dataset '", name, "' (expected int32 [N, T])");
    const Shape shape = file.shape(name);
    require(shape.size() == 2, "token data file '", path, "': dataset '", name, "' has rank ", shape.size(),
            " (shape ", shape_string(shape), "); expected [N, T]");
    if (data.rows == 0 && data.seq == 0) {
      data.rows = shape[0];
      data.seq = shape[1];
    }
    require(shape[0] == data.rows && shape[1] == data.seq, "token data file '", path, "': inputs is [", data.rows,
            ", ", data.seq, "] but targets is ", shape_string(shape));
  }
  require(data.rows > 0 && data.seq > 0, "token data file '", path, "' holds no tokens (inputs is [", data.rows, ", ",
          data.seq, "]); expected at least one row");
  data.inputs = file.read_int32("inputs");
  data.targets = file.read_int32("targets");
  if (auto v = file.int_attribute("/", "vocab_size")) {
    data.vocab = *v;
  } else {
    std::int32_t top = -1;
    for (auto ids : {std::span<const std::int32_t>(data.inputs), std::span<const std::int32_t>(data.targets)})
      for (std::int32_t id : ids) top = std::max(top, id);
    data.vocab = static_cast<std::int64_t>(top) + 1;
  }
  return data;
}

TokenData text_corpus_tokens(const std::string& path, std::int64_t seq) {
  require(seq > 0, "the sequence length must be positive; got ", seq);
  std::ifstream in(path, std::ios::binary);
  require(in.good(), "cannot read the text corpus '", path, "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  require(static_cast<std::int64_t>(text.size()) > seq, "the text corpus '", path, "' holds ", text.size(),
          " characters; one sequence of T=", seq, " needs at least ", seq + 1);
  std::array<std::int32_t, 256> id{};
  id.fill(-1);
  for (unsigned char c : text) id[c] = 0;
  std::int32_t next = 0;
  for (auto& v : id)
    if (v == 0) v = next++;
  TokenData data;
  data.source = path;
  data.seq = seq;
  data.vocab = next;
  data.rows = text.size() > 0 ? static_cast<std::int64_t>(text.size() - 1) / seq : 0;
  for (std::int64_t r = 0; r < data.rows; ++r)
    for (std::int64_t t = 0; t < seq; ++t) {
      data.inputs.push_back(id[static_cast<unsigned char>(text[static_cast<std::size_t>(r * seq + t)])]);
      data.targets.push_back(id[static_cast<unsigned char>(text[static_cast<std::size_t>(r * seq + t + 1)])]);
    }
  return data;
}

void write_token_file(const std::string& path, const TokenData& data) {
  write_atomically(path, [&](H5File& file) {
    file.write_int32("inputs", {data.rows, data.seq}, data.inputs);
    file.write_int32("targets", {data.rows, data.seq}, data.targets);
    file.set_attribute("/", "vocab_size", data.vocab);
  });
}

std::string find_default_corpus() {
  // $MDTP_DATA_DIR first (a relocated install), then beside the program (a build tree or an
  // installed prefix's share/mdtp), the source tree it was built from, the install prefix, and
  // the working directory (core/data_files.hpp).
  if (const auto found = find_data_file("corpus.txt")) return found->string();
  // The message lists one place per line (not data_file_places' one line): the corpus is the
  // main job's default input, and this is what a user on a relocated install reads first.
  std::string where;
  for (const auto& p : data_file_candidates("corpus.txt")) where += "\n  " + p.string();
  throw_error("no --data given and the shipped corpus data/corpus.txt was not found; looked in:", where);
}

void check_token_data(const TokenData& data, std::int64_t vocab_size, std::int64_t seq, std::int64_t batch) {
  require(data.seq == seq, "token data '", data.source, "' has rows of T=", data.seq, " tokens but the model's block size is ",
          seq);
  require(data.rows >= batch, "token data '", data.source, "' has ", data.rows, " rows; one global batch needs ", batch);
  for (const auto* ids : {&data.inputs, &data.targets})
    for (std::size_t i = 0; i < ids->size(); ++i)
      require((*ids)[i] >= 0 && (*ids)[i] < vocab_size, "token data '", data.source, "': ",
              ids == &data.inputs ? "inputs" : "targets", "[", static_cast<std::int64_t>(i) / seq, ", ",
              static_cast<std::int64_t>(i) % seq, "] = ", (*ids)[i], " is outside the vocabulary [0, ", vocab_size, ")");
}

TokenRows batch_rows(const TokenData& data, std::int64_t position, std::int64_t first, std::int64_t count) {
  TokenRows rows;
  for (std::int64_t r = 0; r < count; ++r) {
    const std::int64_t row = (position + first + r) % data.rows;
    const auto begin = static_cast<std::size_t>(row * data.seq), end = begin + static_cast<std::size_t>(data.seq);
    rows.inputs.insert(rows.inputs.end(), data.inputs.begin() + begin, data.inputs.begin() + end);
    rows.targets.insert(rows.targets.end(), data.targets.begin() + begin, data.targets.begin() + end);
  }
  return rows;
}

}  // namespace mdtp
