# The gate suites: one MPI executable, launched once per CPU fixture (scenarios run one after another inside
# the launch). `loopgate gate` launches the same executable itself and builds the verdict table.
# The suites are an OBJECT library: every object lands in an executable linking it (none dropped, so every
# GoogleTest registration stays), and the installed package exports it as loopgate::gate_suites, from which a
# user builds a gate executable with their own arms (docs/custom-arms.md).
add_library(loopgate_gate_suites OBJECT ${GATE_SOURCES})
target_link_libraries(loopgate_gate_suites PUBLIC loopgate_fixtures loopgate_gtest_main)
loopgate_use_pch(loopgate_gate_suites)
loopgate_unity(loopgate_gate_suites)
add_executable(loopgate_gates)
target_link_libraries(loopgate_gates PRIVATE loopgate_gate_suites)
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
# Isolation across orders: the bit-exact checks (golden values, equivalence, the isolation repeat) with the tests,
# and so the scenarios on the shared communicators, in a shuffled order (gtest's seeded shuffle: the same on every
# rank). Golden's bits are the unshuffled run's, so a scenario that leaks into the next fails here.
loopgate_add_mpi_test(NAME gate_pp2_shuffled TARGET loopgate_gates NP 2 TIMEOUT 300 LABELS gate pp2
  ARGS --lg_fixture=pp2 --lg_timeout=240 --gtest_shuffle --gtest_random_seed=20261201
       "--gtest_filter=*GoldenValues*:*Equivalence*:*Isolation*:*LrSchedule*")
