# loopgate_add_mpi_test(NAME name TARGET exe NP n [LABELS ...] [TIMEOUT s] [ARGS ...]
#                       [RESOURCE_GROUPS spec] [WILL_FAIL] [PASS_REGULAR_EXPRESSION re] [FAIL_REGULAR_EXPRESSION re])
#
# Registers one CTest test that runs `mpiexec -n NP <exe> ARGS` with the Open MPI settings a root,
# oversubscribed, containerised machine needs. Every MPI test gets a TIMEOUT: a rank that fails before a
# collective leaves the others blocked in it (docs/design.md "CPU facts"). A GPU test also gets the label
# gpusN, N the GPUs it holds at once, so a runner with fewer GPUs leaves it out by label (ci/gpu-select.sh)
# instead of CTest reporting it "Not Run" and exiting 8.
# The launch environment's one home, mpi-env.list beside this file (in the source tree and installed).
file(STRINGS ${CMAKE_CURRENT_LIST_DIR}/mpi-env.list LOOPGATE_MPI_ENV REGEX "^[A-Za-z_]+=")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/mpi-env.list)

# The GPUs a test holds at once: from RESOURCE_GROUPS ("N,gpus:1", groups separated by ';'; each gpus entry of a
# group is one GPU, as ci/gpu-resources.json gives each GPU one slot), else NP for a test labelled gpu.
function(loopgate_gpus_needed out spec np labels)
  set(total 0)
  if(spec MATCHES "gpus:")
    foreach(group IN LISTS spec)
      set(count 1)
      if(group MATCHES "^ *([0-9]+) *,(.*)$")
        set(count ${CMAKE_MATCH_1})
        set(group "${CMAKE_MATCH_2}")
      endif()
      string(REGEX MATCHALL "gpus *:" entries "${group}")
      list(LENGTH entries n)
      math(EXPR total "${total} + ${count} * ${n}")
    endforeach()
  elseif("gpu" IN_LIST labels)
    set(total ${np})
  endif()
  set(${out} ${total} PARENT_SCOPE)
endfunction()

function(loopgate_add_mpi_test)
  cmake_parse_arguments(T "WILL_FAIL" "NAME;TARGET;NP;TIMEOUT;RESOURCE_GROUPS;PASS_REGULAR_EXPRESSION;FAIL_REGULAR_EXPRESSION"
                        "LABELS;ARGS" ${ARGN})
  if(NOT T_NAME OR NOT T_TARGET OR NOT T_NP)
    message(FATAL_ERROR "loopgate_add_mpi_test: NAME, TARGET and NP are required")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${T_NP} ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:${T_TARGET}> ${MPIEXEC_POSTFLAGS} ${T_ARGS})
  set(labels mpi np${T_NP} ${T_LABELS})  # np<N>: the rank count, for label filters (preset cpu-asan: np2)
  loopgate_gpus_needed(gpus "${T_RESOURCE_GROUPS}" ${T_NP} "${labels}")
  if(gpus GREATER 0)
    list(APPEND labels gpu gpus${gpus})
  else()
    list(APPEND labels cpu)
  endif()
  list(REMOVE_DUPLICATES labels)
  # PROCESSORS is capped at the machine's core count so the scheduler does not refuse big jobs.
  cmake_host_system_information(RESULT ncores QUERY NUMBER_OF_LOGICAL_CORES)
  set(procs ${T_NP})
  if(procs GREATER ncores)
    set(procs ${ncores})
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    TIMEOUT ${T_TIMEOUT} LABELS "${labels}" PROCESSORS ${procs}
    ENVIRONMENT "${LOOPGATE_MPI_ENV}")
  if(T_WILL_FAIL)
    set_tests_properties(${T_NAME} PROPERTIES WILL_FAIL TRUE)
  endif()
  if(T_PASS_REGULAR_EXPRESSION)
    set_tests_properties(${T_NAME} PROPERTIES PASS_REGULAR_EXPRESSION "${T_PASS_REGULAR_EXPRESSION}")
  endif()
  if(T_FAIL_REGULAR_EXPRESSION)
    set_tests_properties(${T_NAME} PROPERTIES FAIL_REGULAR_EXPRESSION "${T_FAIL_REGULAR_EXPRESSION}")
  endif()
  if(T_RESOURCE_GROUPS)
    set_tests_properties(${T_NAME} PROPERTIES RESOURCE_GROUPS "${T_RESOURCE_GROUPS}")
  endif()
endfunction()

# loopgate_add_unit_test(NAME name TARGET exe [LABELS ...] [ARGS ...]): a single-process test.
function(loopgate_add_unit_test)
  cmake_parse_arguments(T "" "NAME;TARGET;TIMEOUT" "LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${T_NAME} COMMAND $<TARGET_FILE:${T_TARGET}> ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;cpu;${T_LABELS}"
    ENVIRONMENT "${LOOPGATE_MPI_ENV}")
endfunction()

# loopgate_add_cli_test(NAME name TARGET exe EXPECT_RC n [WORKDIR dir] ARGS ... [MATCH regex ...]): a
# single-process run of a CLI that must exit with EXPECT_RC and print every MATCH (ctest/ExpectRun.cmake).
function(loopgate_add_cli_test)
  cmake_parse_arguments(T "" "NAME;TARGET;EXPECT_RC;WORKDIR;TIMEOUT" "ARGS;MATCH;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  if(NOT T_WORKDIR)
    set(T_WORKDIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  list(JOIN T_ARGS "::" args)
  list(JOIN T_MATCH "::" match)
  add_test(NAME ${T_NAME}
           COMMAND ${CMAKE_COMMAND} "-DEXE=$<TARGET_FILE:${T_TARGET}>" "-DARGS=${args}" "-DWORKDIR=${T_WORKDIR}"
                   "-DEXPECT_RC=${T_EXPECT_RC}" "-DMATCH=${match}" -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/ExpectRun.cmake)
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;cpu;cli;${T_LABELS}")
endfunction()
