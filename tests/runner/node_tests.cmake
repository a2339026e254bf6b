# The node stage's tests, included from this folder's CMakeLists.txt.
#   pilot_node_unit_tests (label unit): host lists, rank variables and
#   results.json's stages.node; links the torch-free pilot_runner_hostlist.
#   runner.node_* (label runner): node_test.py drives pilot-runner with two
#   local processes over Gloo.
add_executable(pilot_node_unit_tests ${CMAKE_CURRENT_LIST_DIR}/node_hostlist_test.cc
                                     ${CMAKE_CURRENT_LIST_DIR}/node_results_test.cc)
target_link_libraries(pilot_node_unit_tests PRIVATE pilot_runner_hostlist pilot_core GTest::gtest_main)
pilot_warnings(pilot_node_unit_tests)
gtest_discover_tests(pilot_node_unit_tests PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)

if(TARGET pilot-runner)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  foreach(name ddp sharded equivalence equivalence_variants crash restore_can_fail multinode)
    add_test(NAME runner.node_${name}
             COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/node_test.py
                     $<TARGET_FILE:pilot-runner> ${CMAKE_SOURCE_DIR}
                     ${CMAKE_CURRENT_BINARY_DIR}/node-work ${name})
    set_tests_properties(runner.node_${name} PROPERTIES LABELS runner TIMEOUT 600)
  endforeach()
endif()
