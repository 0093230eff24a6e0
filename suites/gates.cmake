# The gate suites: one MPI executable, launched once per CPU fixture (scenarios run one after another inside
# the launch). `loopgate gate` launches the same executable itself and builds the verdict table.
loopgate_test_exe(loopgate_gates ${GATE_SOURCES})
set(LOOPGATE_CPU_FIXTURES "single:1:300" "tp2sp:2:300" "pp2:2:300" "pp2tp2dp2:8:600" "dp64:64:1500")
foreach(entry ${LOOPGATE_CPU_FIXTURES})
  string(REPLACE ":" ";" parts ${entry})
  list(GET parts 0 fx)
  list(GET parts 1 np)
  list(GET parts 2 limit)
  set(labels gate ${fx})
  if(np GREATER 8)
    list(APPEND labels slow)
  endif()
  if(LOOPGATE_SANITIZE)
    math(EXPR limit "${limit} * 3")  # ASan + UBSan: ~2x slower, on a shared 2-core machine up to ~3x
  endif()
  math(EXPR per_test "${limit} - 60")
  loopgate_add_mpi_test(NAME gate_${fx} TARGET loopgate_gates NP ${np} TIMEOUT ${limit} LABELS ${labels}
    ARGS --lg_fixture=${fx} --lg_timeout=${per_test})
endforeach()
