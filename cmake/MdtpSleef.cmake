# The vector math library for the host's element-wise kernels (exp, tanh, log): SLEEF
# (Debian: libsleef-dev), whose _u10 functions are accurate to 1 ulp in f32 and f64.  Without it
# the same kernels call libm one element at a time (correct, slower).
#
# Defines the INTERFACE target mdtp_sleef: links SLEEF and sets MDTP_HAVE_SLEEF, or nothing.
option(MDTP_SLEEF "Vectorised exp/tanh/log through SLEEF when it is found" ON)

add_library(mdtp_sleef INTERFACE)
set(MDTP_VECTOR_MATH "libm (scalar)")
if(MDTP_SLEEF)
  find_path(MDTP_SLEEF_INCLUDE_DIR sleef.h)
  find_library(MDTP_SLEEF_LIBRARY sleef)
  if(MDTP_SLEEF_INCLUDE_DIR AND MDTP_SLEEF_LIBRARY AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    target_include_directories(mdtp_sleef SYSTEM INTERFACE ${MDTP_SLEEF_INCLUDE_DIR})
    target_link_libraries(mdtp_sleef INTERFACE ${MDTP_SLEEF_LIBRARY})
    target_compile_definitions(mdtp_sleef INTERFACE MDTP_HAVE_SLEEF=1)
    set(MDTP_VECTOR_MATH "SLEEF (${MDTP_SLEEF_LIBRARY})")
  else()
    message(WARNING "mdtp: SLEEF not found (Debian: apt-get install libsleef-dev) or not x86-64; exp/tanh/log "
                    "in the host kernels fall back to scalar libm calls")
  endif()
endif()
message(STATUS "mdtp host vector math: ${MDTP_VECTOR_MATH}")
