# Instrumented builds (docs/reliability.md).
#   -DTESSERA_SANITIZE=ON  everything (libraries, tests, tessera) with AddressSanitizer + UndefinedBehaviorSanitizer.
#   -DTESSERA_FUZZ=ON      clang only: the same sanitizers plus libFuzzer coverage, and the fuzz_* targets (fuzz/).
option(TESSERA_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(TESSERA_FUZZ "Build the libFuzzer targets (clang)" OFF)

set(_tessera_sanitizers -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (CXX=clang++): libFuzzer is part of clang's runtime")
  endif()
  add_compile_options(${_tessera_sanitizers} -fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZE)
  add_compile_options(${_tessera_sanitizers})
  add_link_options(-fsanitize=address,undefined)
endif()
