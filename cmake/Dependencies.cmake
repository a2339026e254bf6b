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
