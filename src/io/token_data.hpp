#pragma once
// Training tokens: rows of T input ids and the T target ids that follow them.
//  - HDF5 token data (docs/architecture.md, "File formats"): int32 datasets `inputs` and `targets`, both [N, T]; an optional
//    root attribute `vocab_size`.
//  - the shipped character-level corpus (data/corpus.txt): every distinct byte is a token (ids in
//    byte order), cut into non-overlapping windows of T+1 characters.
// Batches are read in order: the global batch of step s is rows p, p+1, … (mod N) from the data
// position p, which checkpoints save.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mdtp {

struct TokenData {
  std::int64_t rows = 0, seq = 0;
  std::vector<std::int32_t> inputs, targets;  // [rows, seq], row-major
  std::int64_t vocab = 0;                     // the vocabulary the source implies
  std::string source;                         // the file it came from
};

TokenData read_token_file(const std::string& path);
TokenData text_corpus_tokens(const std::string& path, std::int64_t seq);
void write_token_file(const std::string& path, const TokenData& data);  // atomically

// data/corpus.txt relative to the working directory or to the directories above the running
// executable; an mdtp::Error listing where it looked when it is not found.
std::string find_default_corpus();

// Refuses, naming the offending value: ids outside [0, vocab), rows of another length than seq,
// fewer rows than one global batch.  Every rank checks the whole data set, so every rank fails.
void check_token_data(const TokenData& data, std::int64_t vocab_size, std::int64_t seq, std::int64_t batch);

// `count` rows starting at global batch row `first` of the batch at data position `position`.
struct TokenRows {
  std::vector<std::int32_t> inputs, targets;
};
TokenRows batch_rows(const TokenData& data, std::int64_t position, std::int64_t first, std::int64_t count);

}  // namespace mdtp
