# The version string every executable prints: project version plus the git
# commit when built from a checkout.
set(PILOT_VERSION "${PROJECT_VERSION}")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${CMAKE_SOURCE_DIR}/.git")
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short HEAD
                  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                  OUTPUT_VARIABLE _pilot_git OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(_pilot_git)
    set(PILOT_VERSION "${PROJECT_VERSION}+g${_pilot_git}")
  endif()
endif()
configure_file(${CMAKE_SOURCE_DIR}/core/version.h.in
               ${CMAKE_BINARY_DIR}/generated/pilot/version.h @ONLY)
