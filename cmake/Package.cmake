# Debian packages of this build (CPack, `cmake --build BUILD --target package`
# or scripts/package; pilot-install(7) is the admin's side). Three packages,
# one per kind of host, each an install component:
#   slurm-pilot-client      every host that submits or reads pilots (login
#                           nodes, and every node through the next): pilot,
#                           the SPANK plugin and its plugstack snippet (sbatch
#                           loads it to check --pilot at submission), the
#                           site policy, the hardware catalog, the probe,
#                           the man pages
#   slurm-pilot-node        compute nodes: prolog, epilog, supervisor, runner;
#                           its postinst makes the state folder and the keys
#   slurm-pilot-controller  slurmctld's host: job_submit.lua
# The programs carry the install paths they were configured with (the
# policy's folder, the runner's), so packages come only from a build
# configured with CMAKE_INSTALL_PREFIX=/usr (sysconfdir /etc): the package
# target refuses any other (cmake/PackageCheck.cmake).

set(PILOT_PLUGIN_DIR ${CMAKE_INSTALL_FULL_LIBDIR}/slurm-wlm)
set(PILOT_POLICY_FILE ${CMAKE_INSTALL_FULL_SYSCONFDIR}/slurm-pilot/pilot.conf)

# The Slurm side's files, with this installation's paths.
configure_file(${CMAKE_SOURCE_DIR}/etc/plugstack.conf.d/slurm-pilot.conf.in
               ${CMAKE_BINARY_DIR}/etc/slurm-pilot.conf @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/etc/slurm.conf.pilot.in
               ${CMAKE_BINARY_DIR}/etc/slurm.conf.pilot @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/etc/slurm-pilot.conf
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/slurm/plugstack.conf.d COMPONENT client)
install(FILES ${CMAKE_BINARY_DIR}/etc/slurm.conf.pilot
        DESTINATION ${CMAKE_INSTALL_DATADIR}/slurm-pilot COMPONENT node)
install(FILES ${CMAKE_SOURCE_DIR}/etc/job_submit.lua
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/slurm-pilot COMPONENT controller)

# The maintainer scripts: packaging/deb/*.in with common.sh pasted in.
set(PILOT_SYSCONF ${CMAKE_INSTALL_FULL_SYSCONFDIR})
set(PILOT_BINDIR ${CMAKE_INSTALL_FULL_BINDIR})
configure_file(${CMAKE_SOURCE_DIR}/packaging/deb/common.sh.in
               ${CMAKE_BINARY_DIR}/packaging/common.sh @ONLY)
file(READ ${CMAKE_BINARY_DIR}/packaging/common.sh PILOT_COMMON)
set(deb_dir ${CMAKE_BINARY_DIR}/packaging/deb)
foreach(script node.postinst node.postrm controller.postinst controller.postrm)
  string(REPLACE "." ";" parts ${script})
  list(GET parts 0 component)
  list(GET parts 1 name)
  configure_file(${CMAKE_SOURCE_DIR}/packaging/deb/${script}.in
                 ${deb_dir}/${component}/${name} @ONLY
                 FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                                  WORLD_READ WORLD_EXECUTE)
endforeach()
# conffiles: dpkg asks before replacing one an admin edited, and keeps
# them on remove.
set(etc ${CMAKE_INSTALL_FULL_SYSCONFDIR})
file(WRITE ${deb_dir}/client/conffiles
  "${etc}/slurm-pilot/pilot.conf\n${etc}/slurm-pilot/hardware.toml\n"
  "${etc}/slurm/plugstack.conf.d/slurm-pilot.conf\n")
file(WRITE ${deb_dir}/controller/conffiles "${etc}/slurm-pilot/job_submit.lua\n")

set(PILOT_PACKAGE_MAINTAINER "slurm-pilot <root@localhost>" CACHE STRING
    "The Maintainer field of the Debian packages")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME slurm-pilot)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${PILOT_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "proves a PyTorch training run before a long Slurm reservation")
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# The files under /etc have absolute destinations: staged under DESTDIR.
set(CPACK_SET_DESTDIR ON)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL client node controller)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_CLIENT_PACKAGE_NAME slurm-pilot-client)
set(CPACK_COMPONENT_CLIENT_DESCRIPTION
  "slurm-pilot for hosts that submit or read pilots\n"
  "pilot (verdicts, grants, plans, the long run), the SPANK plugin that adds\n"
  "--pilot to sbatch, srun and salloc with its plugstack snippet, the site\n"
  "policy, the hardware catalog, the slurm_pilot probe and the man pages.")
# sbatch, srun and scontrol (pilot run, pilot grant); python3 runs the probe.
set(CPACK_DEBIAN_CLIENT_PACKAGE_DEPENDS "slurm-client, python3")
set(CPACK_DEBIAN_CLIENT_PACKAGE_CONTROL_EXTRA ${deb_dir}/client/conffiles)

set(CPACK_DEBIAN_NODE_PACKAGE_NAME slurm-pilot-node)
set(CPACK_COMPONENT_NODE_DESCRIPTION
  "slurm-pilot for compute nodes\n"
  "The prolog that pins a pilot job, the root supervisor that runs it, the\n"
  "libtorch runner, and the epilog that verifies, decides and signs its\n"
  "verdict. Installing it makes the state folder and the verdict keys.")
# The node depends on the client package of the same version in
# cmake/PackageCheck.cmake, where a version given to cpack is known.
set(CPACK_DEBIAN_NODE_PACKAGE_SUGGESTS "python3-torch, podman, runc")
set(CPACK_DEBIAN_NODE_PACKAGE_CONTROL_EXTRA "${deb_dir}/node/postinst;${deb_dir}/node/postrm")

set(CPACK_DEBIAN_CONTROLLER_PACKAGE_NAME slurm-pilot-controller)
set(CPACK_COMPONENT_CONTROLLER_DESCRIPTION
  "slurm-pilot for slurmctld's host\n"
  "job_submit.lua: long jobs only inside a granted pilot reservation, running\n"
  "the run its pilot proved.")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_ARCHITECTURE all)
# job_submit_lua.so is in slurm-wlm-basic-plugins.
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_DEPENDS "slurmctld, slurm-wlm-basic-plugins")
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_CONTROL_EXTRA
  "${deb_dir}/controller/conffiles;${deb_dir}/controller/postinst;${deb_dir}/controller/postrm")

set(PILOT_PACKAGE_PARTS_BUILT ON)
if(NOT TARGET pilot-runner OR NOT TARGET spank_pilot)
  set(PILOT_PACKAGE_PARTS_BUILT OFF)
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/PackageCheck.cmake.in
               ${CMAKE_BINARY_DIR}/packaging/PackageCheck.cmake @ONLY)
set(CPACK_PROJECT_CONFIG_FILE ${CMAKE_BINARY_DIR}/packaging/PackageCheck.cmake)
include(CPack)
