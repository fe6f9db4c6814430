# Registers a GoogleTest executable with CTest as one test per test suite (`Suite.*`), not one per test.
#
# Why: each process of the unit-test executable spends ~0.5 s in LibTorch's start-up (its operator
# registrations) before any test runs; one process per test was 359 starts, ~150 s of a 2-core CI run's
# wall time, against ~80 s with one process per suite (88 suites; measured 2026-11-27, AMD EPYC). CTest
# still runs suites in parallel, `-R Suite` still selects them, and a failure prints the suite's output
# with the failing test named by GoogleTest.
#
# Used two ways, as CMake's own gtest_discover_tests is:
#   include(gtest_suites.cmake) + mygpt_gtest_suites(TARGET [ENVIRONMENT ...]): after each build of TARGET
#     its suites are listed (--gtest_list_tests) into a file that CTest includes;
#   cmake -DTEST_EXECUTABLE=... -DOUTPUT_FILE=... -DTEST_ENVIRONMENT=... -P gtest_suites.cmake: that listing.

if(CMAKE_SCRIPT_MODE_FILE)
  execute_process(COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
                  OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc TIMEOUT 60)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "listing the tests of ${TEST_EXECUTABLE} failed (${rc}): ${errors}")
  endif()
  # A suite's line starts at column 0 and ends with "." (a typed suite's with "  # TypeParam = ...");
  # its tests follow, indented.
  string(REPLACE "\n" ";" lines "${listing}")
  set(suites "")
  foreach(line IN LISTS lines)
    if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
      list(APPEND suites "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES suites)
  if(NOT suites)
    message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test suites")
  endif()
  set(script "")
  foreach(suite IN LISTS suites)
    string(APPEND script "add_test([==[${suite}]==] [==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${suite}.*]==])\n")
    string(APPEND script "set_tests_properties([==[${suite}]==] PROPERTIES ENVIRONMENT [==[${TEST_ENVIRONMENT}]==]"
                         " SKIP_REGULAR_EXPRESSION [==[\\[  PASSED  \\] 0 tests]==])\n")
  endforeach()
  # Written whole, then moved: CTest never reads half a list.
  file(WRITE "${OUTPUT_FILE}.tmp" "${script}")
  file(RENAME "${OUTPUT_FILE}.tmp" "${OUTPUT_FILE}")
  return()
endif()

set(mygpt_gtest_suites_script "${CMAKE_CURRENT_LIST_FILE}")

function(mygpt_gtest_suites target)
  cmake_parse_arguments(arg "" "" "ENVIRONMENT" ${ARGN})
  set(suites_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
                     COMMAND "${CMAKE_COMMAND}" "-DTEST_EXECUTABLE=$<TARGET_FILE:${target}>"
                             "-DOUTPUT_FILE=${suites_file}" "-DTEST_ENVIRONMENT=${arg_ENVIRONMENT}"
                             -P "${mygpt_gtest_suites_script}"
                     VERBATIM)
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  file(WRITE "${include_file}"
       "if(EXISTS \"${suites_file}\")\n  include(\"${suites_file}\")\nelse()\n"
       "  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
