# Pure layout tests (no communicators): one rank.
mdtp_add_mpi_test(mesh_topology
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_rank_generator.cpp ${CMAKE_CURRENT_LIST_DIR}/test_tp_grid.cpp
          ${CMAKE_CURRENT_LIST_DIR}/test_topology.cpp
  RANKS 1 LIBS mdtp_mesh)

# Communicators on MPI.  27 ranks (3D, q=3) is the one large case; it is kept to one mesh.
mdtp_add_mpi_test(mesh_mpi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mesh.cpp RANKS 1 4 8 27 LIBS mdtp_mesh)
