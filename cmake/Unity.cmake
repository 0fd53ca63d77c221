# Unity batches written by Tessera itself rather than CMake's UNITY_BUILD: CMake's batch files include each
# source by its absolute path, which puts this clone's path into every __FILE__ and into the batch file's
# hash, so a second clone of the same commit could never reuse the first one's compilations (ccache). Here a
# batch includes its sources by paths relative to the batch file (build/unity/x.cc includes
# ../../src/base/file.cc), the same in every clone with its build folder at the same place.
#
# tessera_unity_sources(OUT NAME SOURCES...): OUT is SOURCES themselves with -DTESSERA_UNITY=OFF, else the
# batch files build/unity/NAME_<n>.cc of at most TESSERA_UNITY_BATCH sources each, in the order given.
set(TESSERA_UNITY_BATCH 16 CACHE STRING "Sources per unity batch")
function(tessera_unity_sources out name)
  if(NOT TESSERA_UNITY)
    set(${out} ${ARGN} PARENT_SCOPE)
    return()
  endif()
  set(dir ${CMAKE_BINARY_DIR}/unity)
  set(sources ${ARGN})
  list(REMOVE_DUPLICATES sources)  # a file two globs both name is compiled once, as add_executable would
  set(batches "")
  set(text "")
  set(count 0)
  set(index 0)
  list(LENGTH sources total)
  foreach(src IN LISTS sources)
    get_filename_component(abs ${src} ABSOLUTE BASE_DIR ${CMAKE_SOURCE_DIR})
    file(RELATIVE_PATH rel ${dir} ${abs})
    string(APPEND text "#include \"${rel}\"\n")
    math(EXPR count "${count} + 1")
    math(EXPR total "${total} - 1")
    if(count EQUAL TESSERA_UNITY_BATCH OR total EQUAL 0)
      set(file ${dir}/${name}_${index}.cc)
      file(CONFIGURE OUTPUT ${file} CONTENT "// Unity batch ${index} of ${name} (cmake/Unity.cmake).\n${text}")
      list(APPEND batches ${file})
      set(text "")
      set(count 0)
      math(EXPR index "${index} + 1")
    endif()
  endforeach()
  set(${out} ${batches} PARENT_SCOPE)
endfunction()
