# Sanitized builds (scripts/test runs one after the normal build, in its own
# build folder).
#   PILOT_SANITIZE  every target with AddressSanitizer and UndefinedBehavior-
#                   Sanitizer; undefined behaviour stops the program, as an
#                   ASan report does. No suppressions.
#   PILOT_FUZZ      also the libFuzzer harnesses of tests/fuzz (one per
#                   parser, CTest label `fuzz`); needs clang and its fuzzer
#                   runtime (Debian: clang, libclang-rt-14-dev). The parsers'
#                   libraries get libFuzzer's coverage instrumentation
#                   (-fsanitize=fuzzer-no-link, tests/fuzz/CMakeLists.txt).
option(PILOT_SANITIZE "Build with -fsanitize=address,undefined" OFF)
option(PILOT_FUZZ "Build the libFuzzer harnesses (clang; implies PILOT_SANITIZE)" OFF)
if(PILOT_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "pilot: PILOT_FUZZ: needs clang, not ${CMAKE_CXX_COMPILER_ID} "
                        "(configure with -DCMAKE_CXX_COMPILER=clang++)")
  endif()
  set(PILOT_SANITIZE ON)
endif()
if(PILOT_SANITIZE)
  # -g1 (line tables, after the build type's -g): a report still names
  # file and line, and a libtorch source compiles about a quarter faster.
  # -O1 (after the build type's -O2), the level AddressSanitizer's own
  # documentation suggests: the sanitized build exists to find memory errors,
  # not to be fast, and a libtorch source compiles about a third faster
  # (bench/RESULTS.md, "CI time").
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined
                      -fno-omit-frame-pointer -g1 -O1)
  add_link_options(-fsanitize=address,undefined)
endif()
