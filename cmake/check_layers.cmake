# The layer rule, checked: every `#include "folder/..."` in a src/ folder must name that folder or
# one of the layers it may use (the transitive dependencies declared in src/CMakeLists.txt).
# An include that goes up a layer fails the configure step (the build refuses it) and the ctest
# `layers_include_check` (so CI fails too).
#
#   cmake -DMDTP_SOURCE_DIR=<repo> -DMDTP_LAYER_MAP=<build>/mdtp_layers.cmake -P cmake/check_layers.cmake
#
# The map file sets, for each folder F, MDTP_ALLOWED_<F> = the folders F may include from.
# "mdtp/" (the generated build_info.hpp) is allowed everywhere.
cmake_policy(SET CMP0057 NEW)  # if(IN_LIST), also when run as a script (-P)

function(mdtp_check_layer_includes source_dir map_file)
  include(${map_file})
  set(violations "")
  foreach(folder IN LISTS MDTP_LAYER_FOLDERS)
    file(GLOB_RECURSE files ${source_dir}/src/${folder}/*.hpp ${source_dir}/src/${folder}/*.cpp
         ${source_dir}/src/${folder}/*.cu ${source_dir}/src/${folder}/*.cuh ${source_dir}/src/${folder}/*.in)
    set(allowed ${folder} mdtp ${MDTP_ALLOWED_${folder}})
    foreach(file IN LISTS files)
      file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"[A-Za-z0-9_]+/")
      foreach(line IN LISTS includes)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([A-Za-z0-9_]+)/.*" "\\1" target "${line}")
        if(NOT target IN_LIST allowed)
          file(RELATIVE_PATH rel ${source_dir} ${file})
          string(APPEND violations "\n  ${rel}: includes \"${target}/...\", a layer src/${folder} may not use "
                                   "(allowed: ${allowed})")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(violations)
    message(FATAL_ERROR "mdtp layer rule broken (an include goes up a layer; see docs/architecture.md):${violations}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND MDTP_LAYER_MAP)
  mdtp_check_layer_includes(${MDTP_SOURCE_DIR} ${MDTP_LAYER_MAP})
  message(STATUS "mdtp layer rule: every include goes down")
endif()
