#pragma once
// The allocator of a simulated cluster run with synthetic values (`mdtp simulate --values
// synthetic`, docs/simulate.md): tensors of the sizes a real model has, which hold nothing.
//
// Why: a simulated rank charges each kernel's modelled time (charging_backend.hpp) instead of
// computing, so the values of a simulated run only matter to the checks that read them.  Held as
// real host memory, the tensors of every simulated rank would live in this one process: a 1,024-GPU
// cluster of a 7B model is terabytes.  Synthetic storage makes the model's size free: every model
// tensor (parameters, gradients, optimizer state, activations, communication and workspace
// buffers) gets an address in one arena shared by every allocator of the process, and the kernels
// that would write it are skipped; messages between such tensors are not copied.  Bytes are
// accounted exactly as a real allocation (MemoryTracker), so the memory audit still holds the
// model to the byte.
//
// Addresses: each allocator (one per simulated rank) places its tensors at distinct offsets, first
// fit over its own free list, so the tensors one rank holds at once never overlap — the engine's
// checks against aliasing (a GEMM's C apart from A and B, a reduce-scatter's shard apart from its
// input) hold as they do with values.  Different ranks reuse the same offsets: the arena is as large
// as the largest rank's peak, not their sum.
//
// What keeps its values: MemCategory::other — the small host-side figures a run reduces and
// reports (the step's loss sum, a gradient norm, the memory audit's per-rank figures).
//
// The arena: under SMPI, SMPI_SHARED_MALLOC's "global" mode maps one small file block again and
// again over the whole range (physical memory: one block, plus page tables), and SMPI recognises a
// message from it and skips the copy of its payload.  Elsewhere (tests under a real MPI) an
// anonymous mapping reserved without swap (pages are only touched where something writes).  It is
// one per process — under SMPI, shared by every simulated rank — because per-rank arenas would
// each cost address-space mappings (one per block) and the process has 65,530.  It grows by new,
// larger regions; a region once handed out stays mapped until the process ends (tensors point into
// it).
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/memory.hpp"

namespace mdtp::simulate {

class SyntheticAllocator final : public Allocator {
 public:
  DeviceKind device() const override { return DeviceKind::host; }
  bool holds_values(MemCategory category) const override { return category == MemCategory::other; }

 protected:
  // Storage that holds values (MemCategory::other): the C library's.
  void* raw_allocate(std::size_t bytes) override;
  void raw_release(void* pointer, std::size_t bytes) override;
  // Every other category: a free range of this allocator's offsets in the shared arena.
  void* raw_allocate_in(std::size_t bytes, MemCategory category) override;
  void raw_release_in(void* pointer, std::size_t bytes, MemCategory category) override;

 private:
  std::size_t take_offsets(std::size_t bytes);
  void give_back_offsets(std::size_t offset, std::size_t bytes);

  std::mutex mutex_;                                 // tensors may be released from another thread
  std::map<std::size_t, std::size_t> free_;          // offset -> bytes, coalesced, below end_
  std::size_t end_ = 0;                              // offsets from here on are free
  std::unordered_map<const void*, std::size_t> offset_of_;  // live synthetic storage -> its offset
};

// The size of the process's synthetic arena so far (0 before the first synthetic tensor).
std::size_t synthetic_arena_bytes();

}  // namespace mdtp::simulate
