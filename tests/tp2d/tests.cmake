# SUMMA (2D) and Tesseract (2.5D) specifics: the exact collective list, 2.5D depth = 2D + data
# parallelism, refused shapes.  4: 2D q=2, 2.5D q=2 d=1 and q=1 d=4; 8: 2D q=2 dp=2, 2.5D q=2 d=1,2;
# 9: 2D q=3, 2.5D q=3 d=1; 18: 2D q=3 dp=2, 2.5D q=3 d=1,2.  The generic harness of tests/tp
# provides meshes, scatter/gather and the serial reference.
mdtp_add_mpi_test(tp2d
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_summa_linear.cpp ${CMAKE_CURRENT_LIST_DIR}/test_tesseract_depth.cpp
  RANKS 4 8 9 18 LABELS tp LIBS mdtp_modes)
