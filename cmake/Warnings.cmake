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
