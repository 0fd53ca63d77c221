# Instrumented builds (docs/reliability.md).
#   -DTESSERA_SANITIZE=ON  everything (libraries, tests, tessera) with AddressSanitizer + UndefinedBehaviorSanitizer.
#                          With clang, the same build also carries libFuzzer's coverage (fuzzer-no-link) and
#                          the fuzz_* targets (fuzz/): one instrumented build serves the sanitizer suite and the
#                          fuzz runs (scripts/sanitize.sh, scripts/fuzz.sh).
#   -DTESSERA_FUZZ=ON      clang only: the same as -DTESSERA_SANITIZE=ON with clang.
option(TESSERA_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(TESSERA_FUZZ "Build the libFuzzer targets (clang)" OFF)

if(TESSERA_FUZZ AND NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "TESSERA_FUZZ needs clang (CXX=clang++): libFuzzer is part of clang's runtime")
endif()
if(TESSERA_SANITIZE AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set(TESSERA_FUZZ ON)
endif()

# -O1 and line tables only (gcc -g1, clang -gline-tables-only): what sanitizer reports need (function, file,
# line), at about half the compile time of -O2 -g (measured on two of the larger files), which matters in CI.
set(_tessera_sanitizers -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined -O1)
if(TESSERA_FUZZ)
  set(TESSERA_SANITIZE ON)
  add_compile_options(${_tessera_sanitizers} -gline-tables-only -fsanitize=fuzzer-no-link)
  add_link_options(-fsanitize=address,undefined)
elseif(TESSERA_SANITIZE)
  add_compile_options(${_tessera_sanitizers} -g1)
  add_link_options(-fsanitize=address,undefined)
endif()

# tessera_sanitize_thin(TARGET): the test binaries and the command-line front end hold little of the work
# the tests exercise (that is in the libraries, at -O1); compiled at -O0 they take about half the time.
function(tessera_sanitize_thin target)
  if(TESSERA_SANITIZE)
    target_compile_options(${target} PRIVATE -O0)
  endif()
endfunction()
