#pragma once
// Corrupting an HDF5 file on purpose, for the tests of its checksums: where a contiguous
// dataset's bytes start, and one byte flipped in place.
#include <hdf5.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace mdtp::testing {

// The file offset of a contiguous dataset's data.
inline std::uint64_t data_offset(const std::string& path, const std::string& dataset) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t d = H5Dopen2(f, dataset.c_str(), H5P_DEFAULT);
  const haddr_t offset = H5Dget_offset(d);
  H5Dclose(d);
  H5Fclose(f);
  return static_cast<std::uint64_t>(offset);
}

inline void flip_byte(const std::string& path, std::uint64_t offset) {
  std::fstream io(path, std::ios::binary | std::ios::in | std::ios::out);
  io.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  io.get(c);
  io.seekp(static_cast<std::streamoff>(offset));
  io.put(static_cast<char>(c ^ 0x10));
}

}  // namespace mdtp::testing
