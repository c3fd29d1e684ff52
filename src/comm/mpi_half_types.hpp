#pragma once
// MPI's view of the 16-bit dtypes.  MPICH 4.0 has no bf16 datatype (MPIX_C_FLOAT16 exists for f16
// only, as an extension), so bf16 and f16 travel as a committed contiguous type of two bytes (in
// the SMPI build MPI_UINT16_T: mpi_half_types.cpp says why), and
// their sum, max and min are user-defined operations that compute in f32 and round each result
// back to 16 bits once, to nearest even (core/convert.hpp): what NCCL does for bf16 reductions.
// The wire carries exactly the tensor's bytes, 2 per element, which is what the ledger counts.
//
// Types and operations are local MPI handles (no collective creates them): each MPI communicator
// owns one set, freed with it (unless MPI is already finalized).
#include <mpi.h>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"

namespace mdtp {

class MpiHalfTypes {
 public:
  MpiHalfTypes();
  ~MpiHalfTypes();
  MpiHalfTypes(const MpiHalfTypes&) = delete;
  MpiHalfTypes& operator=(const MpiHalfTypes&) = delete;

  // The MPI datatype of a dtype: MPI_FLOAT, MPI_DOUBLE, or the 2-byte type for bf16 and f16.
  MPI_Datatype datatype(DType dtype) const;
  // MPI_SUM/MAX/MIN for f32 and f64; the user-defined f32-arithmetic operation for bf16 and f16.
  MPI_Op op(DType dtype, ReduceOp op) const;

 private:
  MPI_Datatype two_bytes_ = MPI_DATATYPE_NULL;
  MPI_Op ops_[2][3] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}, {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};
};

}  // namespace mdtp
