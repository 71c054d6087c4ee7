# Fails when HEADER's include closure (every project header it includes,
# directly or through another) holds a header under FORBIDDEN. The closure is
# the compiler's own (-MM: project headers; -MG: a header it cannot find, such
# as a library's outside the default paths, is listed, not an error).
#   cmake -DCXX=compiler -DSRC=src-dir -DHEADER=engine/engine.h -DFORBIDDEN=io/ -P include_closure.cmake
execute_process(
  COMMAND ${CXX} -std=c++20 -I${SRC} -x c++ -MM -MG ${SRC}/${HEADER}
  OUTPUT_VARIABLE deps
  ERROR_VARIABLE err
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the includes of ${HEADER} failed (${rc}):\n${err}")
endif()
string(REGEX MATCHALL "${SRC}/${FORBIDDEN}[^ \t\r\n\\\\]+" found "${deps}")
if(found)
  list(REMOVE_DUPLICATES found)
  string(REPLACE "${SRC}/" "" found "${found}")
  message(FATAL_ERROR "${HEADER} includes ${FORBIDDEN} headers: ${found}")
endif()
string(REGEX MATCHALL "${SRC}/[^ \t\r\n\\\\]+" all "${deps}")
list(LENGTH all n)
message(STATUS "${HEADER}: ${n} project headers, none under ${FORBIDDEN}")
