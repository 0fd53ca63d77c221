# Instrumented builds (docs/reliability.md).
#   -DTESSERA_SANITIZE=ON  everything (libraries, tests, tessera) with AddressSanitizer + UndefinedBehaviorSanitizer.
#   -DTESSERA_FUZZ=ON      clang only: the same sanitizers plus libFuzzer coverage, and the fuzz_* targets (fuzz/).
option(TESSERA_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(TESSERA_FUZZ "Build the libFuzzer targets (clang)" OFF)

# -O1 and line tables only (gcc -g1, clang -gline-tables-only): what sanitizer reports need (function, file,
# line), at about half the compile time of -O2 -g (measured on two of the larger files), which matters in CI.
set(_tessera_sanitizers -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1)
if(TESSERA_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TESSERA_FUZZ needs clang (CXX=clang++): libFuzzer is part of clang's runtime")
  endif()
  add_compile_options(${_tessera_sanitizers} -gline-tables-only -fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZE)
  add_compile_options(${_tessera_sanitizers} -g1)
  add_link_options(-fsanitize=address,undefined)
endif()
