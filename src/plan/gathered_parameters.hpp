#pragma once
// ZeRO-3's gathered temporaries (docs/memory.md): between uses a rank holds only its shard of each
// bucket; before a unit's forward or backward-input pass the engine gathers the buckets the pass
// reads and starts gathering those of the next pass in the stage's pass order (plan/unit_passes.hpp),
// and after the pass frees what neither of them reads.  So while pass i runs, the gathered
// (full, padded) buckets are those read by pass i or pass i + 1; with keep-for-step nothing is freed
// before the step ends, so they are every bucket read by passes 0 … i + 1.  The peak is the largest
// of those sums over the step's passes.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mdtp {

// `reads[i]`: the buckets pass i reads (in the stage's pass order); `bucket_bytes[b]`: bucket b's
// padded bytes.  An mdtp::Error for a bucket index outside bucket_bytes.
std::int64_t gathered_parameter_peak(const std::vector<std::vector<std::size_t>>& reads,
                                     const std::vector<std::int64_t>& bucket_bytes, bool keep_for_step);

}  // namespace mdtp
