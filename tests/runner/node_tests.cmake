# The node stage's tests, included from this folder's CMakeLists.txt.
#   runner.node_* (label runner): node_test.py drives pilot-runner with two
#   local processes over Gloo. (Host lists, rank variables and results.json's
#   stages.node are formats: tests/core/records/.)
if(TARGET pilot-runner)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  foreach(name ddp sharded equivalence equivalence_variants crash restore_can_fail multinode)
    add_test(NAME runner.node_${name}
             COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/node_test.py
                     $<TARGET_FILE:pilot-runner> ${CMAKE_SOURCE_DIR}
                     ${CMAKE_CURRENT_BINARY_DIR}/node-work ${name})
    set_tests_properties(runner.node_${name} PROPERTIES LABELS "runner;sanitize" TIMEOUT 600)
  endforeach()
  # node_equivalence compares node_ddp's and node_sharded's losses with one process's.
  set_tests_properties(runner.node_ddp runner.node_sharded PROPERTIES FIXTURES_SETUP runner_node_runs)
  set_tests_properties(runner.node_equivalence PROPERTIES FIXTURES_REQUIRED runner_node_runs)
  # Seconds under the sanitizer (COST: CMakeLists.txt here says why).
  set_tests_properties(runner.node_equivalence_variants PROPERTIES COST 150)
  set_tests_properties(runner.node_equivalence PROPERTIES COST 30)
endif()
