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
  # A new commit re-runs this at the next build, so an incremental build
  # does not keep printing the commit it was configured at.
  foreach(_ref HEAD refs/heads packed-refs)
    execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --git-path ${_ref}
                    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
                    OUTPUT_VARIABLE _pilot_path OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_pilot_path AND NOT IS_ABSOLUTE "${_pilot_path}")
      set(_pilot_path "${CMAKE_SOURCE_DIR}/${_pilot_path}")
    endif()
    if(_pilot_path AND EXISTS "${_pilot_path}")
      if(IS_DIRECTORY "${_pilot_path}")
        file(GLOB_RECURSE _pilot_refs "${_pilot_path}/*")
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_pilot_refs})
      else()
        set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_pilot_path}")
      endif()
    endif()
  endforeach()
endif()
configure_file(${CMAKE_SOURCE_DIR}/core/base/version.h.in
               ${CMAKE_BINARY_DIR}/generated/pilot/version.h @ONLY)
