# Warnings for the project's own targets (not for third-party headers, which
# are included as SYSTEM).
function(pilot_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow=local -Wnon-virtual-dtor
    -Wcast-align -Wunused -Woverloaded-virtual -Wformat=2 -Wimplicit-fallthrough)
  if(PILOT_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
option(PILOT_WERROR "Treat warnings as errors" OFF)
