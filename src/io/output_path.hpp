#pragma once
// Output paths checked before a run starts, as its input paths are: a path the run could not write
// at its end (hours later, on a cluster) is refused at once, with one line naming the option and
// the path, so no result is computed only to be lost.  Nothing is created or written here.
#include <string>

namespace mdtp {

// An HDF5 output (results, checkpoint, gradient dump): not a directory; an existing file must be
// HDF5 (it is appended to or replaced atomically, never a file of another kind); the nearest
// existing ancestor directory must be a writable directory (missing ones are made when written).
void check_hdf5_output(const std::string& path, const std::string& option);

// A text output (a run spec, a JSON report): not a directory; its directory as above.  An
// existing file is replaced atomically.
void check_text_output(const std::string& path, const std::string& option);

}  // namespace mdtp
