# The host GEMM library: a CBLAS found at configure time, else Eigen's own GEMM.
#
#   -DMDTP_BLAS=OFF             Eigen's GEMM (no BLAS needed)
#   (default)                   OpenBLAS (Debian: libopenblas-dev, pthread or serial flavour)
#   -DBLA_VENDOR=Intel10_64lp_seq | FLAME | ...   any CBLAS CMake's FindBLAS knows (MKL, BLIS and
#                               AMD's AOCL-BLIS as FLAME); MKLROOT / CMAKE_PREFIX_PATH point at a
#                               cluster's copy
#
# Only a named vendor is searched: FindBLAS' "All" would happily pick the netlib reference BLAS,
# which is slower than Eigen.  Which library, version and kernel set ran is read at run time
# (core/blas_library.cpp), so no vendor macro is needed beyond the header's name.
#
# Defines the INTERFACE target mdtp_blas: links the BLAS and sets MDTP_HAVE_CBLAS (and
# MDTP_CBLAS_MKL when the header is MKL's mkl_cblas.h), or nothing at all for Eigen.
option(MDTP_BLAS "GEMM through a CBLAS (OpenBLAS by default, BLA_VENDOR for another); OFF: Eigen's GEMM" ON)

add_library(mdtp_blas INTERFACE)
set(MDTP_GEMM_LIBRARY "Eigen")
if(MDTP_BLAS)
  set(_mdtp_vendor "${BLA_VENDOR}")
  if(NOT _mdtp_vendor)
    set(_mdtp_vendor OpenBLAS)
  endif()
  set(BLA_VENDOR ${_mdtp_vendor})
  find_package(BLAS QUIET)
  if(BLAS_FOUND)
    # The CBLAS header: MKL ships mkl_cblas.h; OpenBLAS, BLIS, AOCL and netlib ship cblas.h.  On
    # Debian the OpenBLAS one sits in a per-flavour folder next to the library the alternatives
    # system selected (…/openblas-pthread/libopenblas.so → …/include/…/openblas-pthread/cblas.h).
    set(_mdtp_hints "")
    foreach(lib IN LISTS BLAS_LIBRARIES)
      if(lib MATCHES "^/")
        get_filename_component(_real "${lib}" REALPATH)
        get_filename_component(_flavour_dir "${_real}" DIRECTORY)
        get_filename_component(_flavour "${_flavour_dir}" NAME)
        get_filename_component(_libdir "${_flavour_dir}" DIRECTORY)
        get_filename_component(_multiarch "${_libdir}" NAME)
        list(APPEND _mdtp_hints "${_flavour_dir}/../include" "${_libdir}/../include/${_multiarch}/${_flavour}"
             "${_libdir}/../../include/${_multiarch}/${_flavour}" "/usr/include/${_multiarch}/${_flavour}")
      endif()
    endforeach()
    if(_mdtp_vendor MATCHES "^Intel")
      set(_mdtp_header mkl_cblas.h)
    else()
      set(_mdtp_header cblas.h)
    endif()
    find_path(MDTP_CBLAS_INCLUDE_DIR ${_mdtp_header}
              HINTS ${_mdtp_hints} $ENV{MKLROOT}/include $ENV{BLIS_HOME}/include $ENV{AOCL_ROOT}/include
              PATH_SUFFIXES openblas blis include)
    if(MDTP_CBLAS_INCLUDE_DIR)
      target_include_directories(mdtp_blas SYSTEM INTERFACE ${MDTP_CBLAS_INCLUDE_DIR})
      target_link_libraries(mdtp_blas INTERFACE ${BLAS_LIBRARIES} ${BLAS_LINKER_FLAGS})
      target_compile_definitions(mdtp_blas INTERFACE MDTP_HAVE_CBLAS=1 $<$<STREQUAL:${_mdtp_header},mkl_cblas.h>:MDTP_CBLAS_MKL=1>)
      set(MDTP_GEMM_LIBRARY "${_mdtp_vendor} (${BLAS_LIBRARIES}; ${MDTP_CBLAS_INCLUDE_DIR}/${_mdtp_header})")
    else()
      message(WARNING "mdtp: found the ${_mdtp_vendor} BLAS (${BLAS_LIBRARIES}) but not its ${_mdtp_header}; "
                      "GEMM falls back to Eigen (set MDTP_CBLAS_INCLUDE_DIR)")
    endif()
  else()
    message(WARNING "mdtp: no ${_mdtp_vendor} BLAS found (Debian: apt-get install libopenblas-dev; another "
                    "library: -DBLA_VENDOR=...); GEMM falls back to Eigen, several times slower")
  endif()
endif()
message(STATUS "mdtp host GEMM: ${MDTP_GEMM_LIBRARY}")
