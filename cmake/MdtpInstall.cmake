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
# The tables of measured runs `mdtp plan --validate` holds the model against (src/cost/measured_tables.hpp).
install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/measured/ DESTINATION ${CMAKE_INSTALL_DATADIR}/mdtp/measured
        FILES_MATCHING PATTERN "*.json")

install(EXPORT mdtpTargets NAMESPACE mdtp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
# HDF5 in the installed package.  mdtpConfig.cmake cannot call find_dependency(HDF5 COMPONENTS C):
# FindHDF5 interrogates the h5cc wrapper by try_compile()-ing a .c file, which fails ("try_compile()
# works only for enabled languages") in a consumer whose project() enables only CXX, and Debian's
# libhdf5-dev (bookworm: 1.10.8, /usr/lib/x86_64-linux-gnu/hdf5/serial) ships no hdf5-config.cmake
# for a find_package(hdf5 CONFIG) that needs no language (only h5cc and pkg-config's hdf5-serial.pc).
# So the package records the hdf5::hdf5 imported target that FindHDF5 made for mdtp's own build (the
# library, its include directories and definitions) and mdtpConfig.cmake re-creates it: no language
# is needed, and the consumer links the very HDF5 that mdtp's static libraries were compiled against.
get_target_property(_mdtp_hdf5_type hdf5::hdf5 TYPE)
string(REPLACE "_LIBRARY" "" MDTP_CONFIG_HDF5_TYPE "${_mdtp_hdf5_type}")   # UNKNOWN or INTERFACE
set(MDTP_CONFIG_HDF5_PROPERTIES "")
set(MDTP_CONFIG_HDF5_FILES "")
foreach(_prop IN ITEMS IMPORTED_CONFIGURATIONS IMPORTED_LOCATION IMPORTED_LOCATION_RELEASE IMPORTED_LOCATION_DEBUG
                       INTERFACE_INCLUDE_DIRECTORIES INTERFACE_COMPILE_DEFINITIONS)
  get_target_property(_value hdf5::hdf5 ${_prop})
  if(_value)
    string(APPEND MDTP_CONFIG_HDF5_PROPERTIES " ${_prop} \"${_value}\"")
    if(_prop MATCHES "^(IMPORTED_LOCATION|INTERFACE_INCLUDE_DIRECTORIES)")
      list(APPEND MDTP_CONFIG_HDF5_FILES ${_value})
    endif()
  endif()
endforeach()
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/mdtpConfig.cmake.in ${CMAKE_BINARY_DIR}/mdtpConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/mdtpConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/mdtpConfig.cmake ${CMAKE_BINARY_DIR}/mdtpConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/mdtp)
