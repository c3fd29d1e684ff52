# `cmake --install` puts the libraries, headers, the `mdtp` program, the analysis scripts and the
# shipped corpus under a prefix, and exports mdtp::mdtp (every layer) so that a downstream project
# can `find_package(mdtp)` and write its own experiment against the mesh, the modes and the
# ledger (tests/consumer is such a project; CI builds it against an install).
include(CMakePackageConfigHelpers)

install(TARGETS ${MDTP_LAYER_TARGETS} mdtp_lib mdtp_blas mdtp_sleef EXPORT mdtpTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mdtp)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/src/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mdtp
        FILES_MATCHING PATTERN "*.hpp" PATTERN "cuda" EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/src/generated/mdtp/build_info.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/mdtp/mdtp)
install(TARGETS mdtp RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/experiments/analysis/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mdtp/analysis
        FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${CMAKE_SOURCE_DIR}/data/corpus.txt DESTINATION ${CMAKE_INSTALL_DATADIR}/mdtp)
# The cluster presets `mdtp plan --cluster NAME` finds (src/cost/cluster.hpp).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/clusters/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mdtp/clusters
        FILES_MATCHING PATTERN "*.json")

install(EXPORT mdtpTargets NAMESPACE mdtp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mdtpConfig.cmake.in ${CMAKE_BINARY_DIR}/mdtpConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mdtpConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mdtpConfig.cmake ${CMAKE_BINARY_DIR}/mdtpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
