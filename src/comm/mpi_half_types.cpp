#include "comm/mpi_half_types.hpp"

#include <algorithm>
#include <cstdint>

#include "comm/wait_policy.hpp"
#include "core/convert.hpp"
#include "core/error.hpp"

namespace mdtp {
namespace {

// inout[i] = in[i] (op) inout[i] over `len` 16-bit elements of format D, in f32, a block at a time.
template <DType D, ReduceOp Op>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  constexpr int kBlock = 1024;
  float a[kBlock], b[kBlock];
  auto* x = static_cast<const std::uint16_t*>(in);
  auto* y = static_cast<std::uint16_t*>(inout);
  for (int i0 = 0; i0 < *len; i0 += kBlock) {
    const int n = std::min(kBlock, *len - i0);
    widen_to_f32(D, x + i0, a, static_cast<std::size_t>(n));
    widen_to_f32(D, y + i0, b, static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      if constexpr (Op == ReduceOp::sum) b[i] = a[i] + b[i];
      else if constexpr (Op == ReduceOp::max) b[i] = std::max(a[i], b[i]);
      else b[i] = std::min(a[i], b[i]);
    }
    narrow_from_f32(b, D, y + i0, static_cast<std::size_t>(n));
  }
}

int format_index(DType dtype) { return dtype == DType::bf16 ? 0 : 1; }

}  // namespace

MpiHalfTypes::MpiHalfTypes() {
#ifdef MDTP_SMPI
  // SMPI (SimGrid 3.32) copies every message of a derived datatype through a temporary buffer of
  // its size, allocated per request (Request::init_buffer): 25 MB per bf16 gather step of a 4096-wide
  // layer, gigabytes in flight at 64 simulated ranks.  A predefined 2-byte type travels as it is;
  // the operations below never look at the datatype they are given.
  two_bytes_ = MPI_UINT16_T;
#else
  check_mpi(MPI_Type_contiguous(2, MPI_BYTE, &two_bytes_), "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&two_bytes_), "MPI_Type_commit");
#endif
  // All three are commutative: MPI may combine partial results in any order.
  MPI_User_function* functions[2][3] = {
      {reduce_16bit<DType::bf16, ReduceOp::sum>, reduce_16bit<DType::bf16, ReduceOp::max>,
       reduce_16bit<DType::bf16, ReduceOp::min>},
      {reduce_16bit<DType::f16, ReduceOp::sum>, reduce_16bit<DType::f16, ReduceOp::max>,
       reduce_16bit<DType::f16, ReduceOp::min>}};
  for (int f = 0; f < 2; ++f)
    for (int o = 0; o < 3; ++o) check_mpi(MPI_Op_create(functions[f][o], 1, &ops_[f][o]), "MPI_Op_create");
}

MpiHalfTypes::~MpiHalfTypes() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& format : ops_)
    for (MPI_Op& op : format)
      if (op != MPI_OP_NULL) MPI_Op_free(&op);
#ifndef MDTP_SMPI
  if (two_bytes_ != MPI_DATATYPE_NULL) MPI_Type_free(&two_bytes_);
#endif
}

MPI_Datatype MpiHalfTypes::datatype(DType dtype) const {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return two_bytes_;
  }
  throw_error("no MPI datatype for dtype code ", static_cast<int>(dtype));
}

MPI_Op MpiHalfTypes::op(DType dtype, ReduceOp op) const {
  const int o = op == ReduceOp::sum ? 0 : op == ReduceOp::max ? 1 : 2;
  if (is_16bit(dtype)) return ops_[format_index(dtype)][o];
  switch (op) {
    case ReduceOp::sum: return MPI_SUM;
    case ReduceOp::max: return MPI_MAX;
    case ReduceOp::min: return MPI_MIN;
  }
  throw_error("unknown reduce op code ", static_cast<int>(op));
}

}  // namespace mdtp
