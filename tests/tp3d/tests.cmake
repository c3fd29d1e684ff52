# 3D tensor parallelism beyond the cross-mode suite of tests/tp (whose harness it reuses): the
# exact collective list of Linear3D for both keep options, the parity chain against the serial
# reference, LayerNorm at both parities, the refusals.  8 ranks: q = 2; 27 ranks: q = 3 (small).
mdtp_add_mpi_test(tp3d
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_linear_3d.cpp ${CMAKE_CURRENT_LIST_DIR}/test_layernorm_3d.cpp
  RANKS 8 27 LABELS tp LIBS mdtp_modes)
