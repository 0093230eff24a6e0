# `cmake --install build/cpu --prefix P`: the package a framework engineer gates their own loop variant with
# (docs/custom-arms.md). Installs the trainer, fixtures, MPI gtest main and gate suites (exported as
# loopgate::trainer, ::fixtures, ::gtest_main, ::gate_suites), the `loopgate` CLI (loopgate::loopgate), the
# headers (include/loopgate/{trainer,fixtures}/...), golden/ (share/loopgate/golden), the trainer's sources for the
# source scan (share/loopgate/trainer) and
# lib/cmake/loopgate/loopgateConfig.cmake with loopgate_add_mpi_test(). Not installed: the project's own test
# executables and the precompiled header (a build-speed device of this tree: no target's interface names it).
#
# Only the CPU tier built against the system packages exports: a vendored GoogleTest or header-only fmt is a
# target of this build, which a consumer's find_dependency could not find again.
if(LOOPGATE_CUDA OR LOOPGATE_VENDOR_DIR OR NOT fmt_FOUND OR NOT nlohmann_json_FOUND)
  message(STATUS "loopgate: no install/export rules (GPU tier or vendored dependencies)")
  return()
endif()
include(CMakePackageConfigHelpers)

set(LOOPGATE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/loopgate)
set(LOOPGATE_INSTALL_GOLDEN_DIR ${CMAKE_INSTALL_DATADIR}/loopgate/golden)
set(LOOPGATE_INSTALL_TRAINER_DIR ${CMAKE_INSTALL_DATADIR}/loopgate/trainer)

# A consumer compiles the headers as C++17 at least (LibTorch 1.13's headers fail in C++20 with clang 14 anyway).
target_compile_features(loopgate_trainer PUBLIC cxx_std_17)
set_target_properties(loopgate_trainer PROPERTIES EXPORT_NAME trainer)
set_target_properties(loopgate_fixtures PROPERTIES EXPORT_NAME fixtures)
set_target_properties(loopgate_gtest_main PROPERTIES EXPORT_NAME gtest_main)
set_target_properties(loopgate_gate_suites PROPERTIES EXPORT_NAME gate_suites)
set_target_properties(loopgate PROPERTIES EXPORT_NAME loopgate INSTALL_RPATH_USE_LINK_PATH TRUE)

install(TARGETS loopgate_trainer loopgate_fixtures loopgate_gtest_main loopgate_gate_suites loopgate
        EXPORT loopgateTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/loopgate/gate_suites)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/trainer ${PROJECT_SOURCE_DIR}/fixtures
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/loopgate FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/golden/ DESTINATION ${LOOPGATE_INSTALL_GOLDEN_DIR})
# The trainer's sources the library was built from: the loop_code gate's source scan reads them
# (LOOPGATE_TRAINER_DIR), so an installed gate scans what it runs, with no source tree around.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/trainer DESTINATION ${CMAKE_INSTALL_DATADIR}/loopgate
        FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.cpp" PATTERN "*.cc" PATTERN "*.cu" PATTERN "*.cuh"
                       PATTERN "*.inl")
install(EXPORT loopgateTargets NAMESPACE loopgate:: DESTINATION ${LOOPGATE_INSTALL_CMAKEDIR})

configure_package_config_file(${PROJECT_SOURCE_DIR}/ctest/loopgateConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/loopgateConfig.cmake
                              INSTALL_DESTINATION ${LOOPGATE_INSTALL_CMAKEDIR}
                              PATH_VARS LOOPGATE_INSTALL_GOLDEN_DIR LOOPGATE_INSTALL_TRAINER_DIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/loopgateConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/loopgateConfig.cmake ${PROJECT_BINARY_DIR}/loopgateConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/ctest/LoopgateMpi.cmake ${PROJECT_SOURCE_DIR}/ctest/ExpectRun.cmake
              ${PROJECT_SOURCE_DIR}/ctest/mpi-env.list
        DESTINATION ${LOOPGATE_INSTALL_CMAKEDIR})
