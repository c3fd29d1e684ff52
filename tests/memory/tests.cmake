# Activation memory (docs/memory.md): the kept-activation peak measured by `mdtp train` at every
# pass end equals the model (per-unit bytes from the local shapes, the peak over the stage's
# schedule) to the byte on every rank, for every TP mode, pp 1 and 2 under gpipe, 1f1b, zb-h1 and
# interleaved, and recompute none, selective and full, for GPT-2 and Llama (grouped-query attention,
# SwiGLU, RMSNorm, no position table, tied or untied head); the schedule replay against sums it
# recomputes from the schedule itself.  Without a pipeline the allocator's whole activation peak
# inside a step (kept + working set) equals the layers' replay (model/activation_timeline.hpp over
# plan/activation_peak.hpp) in every mode, policy and one-stage schedule.  ZeRO-3's gathered temporaries: the `parameters` counter
# inside a pass equals the held shards plus the buckets in use and prefetched; ZeRO-2/3's `gradients`
# counter inside a step equals the held shards plus the full buckets held at once.  Selective
# recomputation against none: bit-identical losses, gradients and parameters, and the same
# communication.  Rank counts: 1, 2, 4 and 8.
mdtp_add_mpi_test(memory_activations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_kept_activations.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_selective_recompute.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_gathered_parameters.cpp
                  ${CMAKE_CURRENT_LIST_DIR}/test_gradient_peak.cpp
                  RANKS 1 2 4 8 LABELS memory train TIMEOUT 300)
