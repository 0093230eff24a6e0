# cmake -DEXE=prog -DARGS=a::b -DWORKDIR=dir -DEXPECT_RC=n -DMATCH=re1::re2 -P ExpectRun.cmake
# Runs EXE with ARGS ("::"-separated) in WORKDIR and passes when its exit code is EXPECT_RC and its output
# (stdout + stderr) matches every regular expression in MATCH. CTest's PASS_REGULAR_EXPRESSION alone would
# ignore the exit code, and WILL_FAIL alone would ignore the output; a CLI test needs both.
string(REPLACE "::" ";" args "${ARGS}")
execute_process(COMMAND ${EXE} ${args} WORKING_DIRECTORY "${WORKDIR}" OUTPUT_VARIABLE out ERROR_VARIABLE err
                RESULT_VARIABLE rc)
message("${out}${err}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit code ${rc}, expected ${EXPECT_RC}")
endif()
string(REPLACE "::" ";" regexes "${MATCH}")
foreach(re IN LISTS regexes)
  if(NOT "${out}${err}" MATCHES "${re}")
    message(FATAL_ERROR "the output does not match: ${re}")
  endif()
endforeach()
