# Third-party dependencies. Everything comes from Debian 12 packages
# (scripts/setup); on other machines point CMAKE_PREFIX_PATH / the *_DIR
# variables at carried copies.
find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(CURL REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.71 REQUIRED COMPONENTS program_options)

# TOML++ is header-only; Debian ships a pkg-config file and a CMake config,
# a carried copy may only have the headers.
find_package(tomlplusplus QUIET)
if(TARGET tomlplusplus::tomlplusplus)
  set(PILOT_TOML_TARGET tomlplusplus::tomlplusplus)
else()
  find_path(TOMLPP_INCLUDE_DIR toml++/toml.h PATHS ${TOMLPP_ROOT} REQUIRED)
  add_library(pilot_tomlpp INTERFACE)
  target_include_directories(pilot_tomlpp SYSTEM INTERFACE ${TOMLPP_INCLUDE_DIR})
  set(PILOT_TOML_TARGET pilot_tomlpp)
endif()

# RE2 (program.loss_pattern: a user's pattern over a program's lines, matched
# in linear time). Its CMake package where one is installed (newer RE2,
# re2::re2), else Debian 12's pkg-config file, else a carried copy under
# RE2_ROOT (include/re2/re2.h, lib/libre2.so; scripts/gpu-build sets it).
find_package(re2 CONFIG QUIET)
if(TARGET re2::re2)
  set(PILOT_RE2_TARGET re2::re2)
else()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND AND NOT RE2_ROOT)
    pkg_check_modules(PILOT_RE2 QUIET IMPORTED_TARGET re2)
  endif()
  if(TARGET PkgConfig::PILOT_RE2)
    set(PILOT_RE2_TARGET PkgConfig::PILOT_RE2)
  else()
    find_path(RE2_INCLUDE_DIR re2/re2.h HINTS ${RE2_ROOT}/include)
    find_library(RE2_LIBRARY re2 HINTS ${RE2_ROOT}/lib ${RE2_ROOT}/lib/x86_64-linux-gnu)
    if(NOT RE2_INCLUDE_DIR OR NOT RE2_LIBRARY)
      message(FATAL_ERROR "RE2 not found: install libre2-dev (scripts/setup) or set RE2_ROOT")
    endif()
    add_library(pilot_re2 INTERFACE)
    target_include_directories(pilot_re2 SYSTEM INTERFACE ${RE2_INCLUDE_DIR})
    target_link_libraries(pilot_re2 INTERFACE ${RE2_LIBRARY} Threads::Threads)
    set(PILOT_RE2_TARGET pilot_re2)
  endif()
endif()

if(PILOT_BUILD_RUNNER)
  find_package(Torch QUIET)
  if(NOT Torch_FOUND)
    message(STATUS "libtorch not found: pilot-runner will not be built")
    set(PILOT_BUILD_RUNNER OFF)
  endif()
endif()

if(PILOT_BUILD_SPANK)
  find_path(SLURM_INCLUDE_DIR slurm/spank.h)
  if(NOT SLURM_INCLUDE_DIR)
    message(STATUS "slurm/spank.h not found: spank_pilot.so will not be built")
    set(PILOT_BUILD_SPANK OFF)
  endif()
endif()

if(PILOT_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
