# Writes the ctest entries of one test binary: one entry per GoogleTest suite
# (every TEST of one name, every case of one fixture or parameter set), run
# as one process with --gtest_filter=Suite.*.
#
# Why suites and not cases: most suites build an expensive fixture once per
# process (a checkpoint, a store over striped drives, a mirror, a tokenizer
# oracle's results), so one process per case built it again for every case:
# under the sanitizers that was most of CI's test time. A failing case is
# still named in the output (ctest --output-on-failure).
#
# Run after each build of the binary (tests/CMakeLists.txt), in script mode:
#   -D TEST_EXECUTABLE=path   the test binary
#   -D EMULATOR=command       what runs it when cross-built (qemu-aarch64 for
#                             the ARM64 build); empty for a native build
#   -D CTEST_FILE=path        the file ctest includes (written here)
#   -D PREFIX=str             prefix of every entry's name (may be empty)
#   -D FILTER=pattern         only suites whose cases match this gtest filter
#   -D ENVIRONMENT=list       ;-separated VAR=value pairs for every entry
#   -D LABELS=list            ctest labels for every entry
#   -D TIMEOUT=seconds        each entry's time limit
cmake_minimum_required(VERSION 3.25)

set(list_args --gtest_list_tests)
if(FILTER)
  list(APPEND list_args "--gtest_filter=${FILTER}")
endif()
execute_process(
  COMMAND ${EMULATOR} "${TEST_EXECUTABLE}" ${list_args}
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE listing_err
  RESULT_VARIABLE rc
  TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the tests of ${TEST_EXECUTABLE} failed (${rc}):\n${listing}${listing_err}")
endif()

# A suite line starts in column 0 and ends with '.', perhaps followed by a
# "  # TypeParam = ..." comment; its cases are the indented lines under it.
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.( .*)?$")
    set(suite "${CMAKE_MATCH_1}")
    list(APPEND suites "${suite}")
    set(cases_${suite} "")
  elseif(line MATCHES "^  ([^ ]+)")
    list(APPEND cases_${suite} "${suite}.${CMAKE_MATCH_1}")
  endif()
endforeach()
list(REMOVE_DUPLICATES suites)

set(emulator_args "")
foreach(arg IN LISTS EMULATOR)
  string(APPEND emulator_args "[==[${arg}]==] ")
endforeach()
set(script "")
foreach(suite IN LISTS suites)
  # A disabled suite (DISABLED_..., a study run by hand with
  # --gtest_also_run_disabled_tests) would run nothing: no entry.
  if(suite MATCHES "^DISABLED_")
    continue()
  endif()
  # Without a filter the suite's pattern; with one, its matching cases by
  # name (gtest's filter has no "and" to combine the two).
  set(filter "${suite}.*")
  if(FILTER)
    list(JOIN cases_${suite} ":" filter)
  endif()
  set(name "${PREFIX}${suite}")
  string(APPEND script
    "add_test([==[${name}]==] ${emulator_args}[==[${TEST_EXECUTABLE}]==] [==[--gtest_filter=${filter}]==])\n"
    "set_tests_properties([==[${name}]==] PROPERTIES TIMEOUT ${TIMEOUT}")
  if(ENVIRONMENT)
    string(APPEND script " ENVIRONMENT [==[${ENVIRONMENT}]==]")
  endif()
  if(LABELS)
    string(APPEND script " LABELS [==[${LABELS}]==]")
  endif()
  string(APPEND script ")\n")
endforeach()
file(WRITE "${CTEST_FILE}" "${script}")
