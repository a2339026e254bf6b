# Hardening flags for everything we build. The prolog and epilog run as root
# on every compute node; the SPANK plugin is loaded into slurmstepd.
add_compile_options(-fstack-protector-strong -fstack-clash-protection)
# Not in sanitized builds: the fortified wrappers hide calls from ASan.
if(NOT CMAKE_BUILD_TYPE STREQUAL "Debug" AND NOT PILOT_SANITIZE)
  add_compile_definitions(_FORTIFY_SOURCE=2)
endif()
add_link_options(-Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack)
