# ctest check of one command line (cmake -DCOMMAND=<a;b;c> -DRC=<exit status> -DOUT=<regex> -P ...):
# the command exits with RC and its stdout+stderr matches OUT.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc STREQUAL RC)
  message(FATAL_ERROR "${COMMAND}: exit status ${rc}, expected ${RC}\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${OUT}")
  message(FATAL_ERROR "${COMMAND}: output does not match '${OUT}':\n${out}${err}")
endif()
