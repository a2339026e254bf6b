# Warnings for the project's own targets (not for third-party headers, which
# are included as SYSTEM).
# (-Wshadow=local is GCC's spelling: clang, the fuzz build's compiler, has none.)
function(pilot_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local> -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
  if(PILOT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  # GCC 12 at -O3 warns -Wrestrict inside libstdc++'s own std::string code
  # (GCC bug 105329, a false positive); keep it a warning there.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-error=restrict)
  endif()
endfunction()
option(PILOT_WERROR "Treat warnings as errors" OFF)

# Compiles a target's sources eight to a unit. Most of the project's compile
# time is the JSON, TOML and GoogleTest templates each source instantiates
# again; a unit instantiates them once (about half the build). A file-local
# name is then seen by the rest of its batch: give helpers names of their
# own, not `Parse` or `Log`. A source that cannot share a unit is named in
# the target's SKIP_UNITY_BUILD_INCLUSION.
function(pilot_unity target)
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
endfunction()
