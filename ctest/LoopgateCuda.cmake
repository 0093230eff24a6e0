# The GPU tier's build. Three cases:
#   LOOPGATE_CUDA=ON (the gpu preset, LibTorch CUDA from the runner's PyTorch): the CUPTI counter, the NCCL
#     backend and the CUDA event source join the trainer (LOOPGATE_HAS_CUDA=1); the injection library, the NCCL
#     smoke program and the GPU tests are built.
#   LOOPGATE_CUDA=OFF with a CUDA toolkit on the machine (CPU CI with /usr/local/cuda): the sources that need no
#     LibTorch CUDA headers — CUPTI core + counter, the injection library, the NCCL smoke program — are
#     compiled (and linked against the driver stubs), never run, so CPU CI catches breakage. No LibTorch TU is
#     added: the cpu preset's build time stays what it was.
#   no toolkit: a message, nothing else.
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # never both the static and the shared CUDA runtime
find_package(CUDAToolkit QUIET)

set(LOOPGATE_CUPTI_SOURCES ${PROJECT_SOURCE_DIR}/trainer/measure/cupti_core.cpp
                           ${PROJECT_SOURCE_DIR}/trainer/measure/cupti_counter.cpp
                           ${PROJECT_SOURCE_DIR}/trainer/measure/cupti_profile.cpp)

if(LOOPGATE_CUDA AND NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR "loopgate: LOOPGATE_CUDA=ON but no CUDA toolkit found (set CUDAToolkit_ROOT)")
endif()

if(CUDAToolkit_FOUND)
  # NCCL: the one inside the runner's PyTorch first (LOOPGATE_TORCH_NCCL_DIR = site-packages/nvidia/nccl: the
  # libnccl.so.2 that LibTorch itself loads), else the toolkit's.
  set(_nccl_hints)
  if(LOOPGATE_TORCH_NCCL_DIR)
    list(APPEND _nccl_hints ${LOOPGATE_TORCH_NCCL_DIR}/lib)
  endif()
  list(APPEND _nccl_hints ${CUDAToolkit_LIBRARY_DIR})
  find_library(LOOPGATE_NCCL_LIBRARY NAMES libnccl.so.2 nccl NAMES_PER_DIR HINTS ${_nccl_hints})
  find_path(LOOPGATE_NCCL_INCLUDE nccl.h HINTS ${LOOPGATE_TORCH_NCCL_DIR}/include ${CUDAToolkit_INCLUDE_DIRS})
  if(NOT TARGET CUDA::cupti)
    message(STATUS "loopgate: CUDA toolkit ${CUDAToolkit_VERSION} has no CUPTI: the sync counter is not built")
  endif()
endif()

# The injection library: CUPTI + the driver, nothing else (loadable into any CUDA process), and the Python frame
# walker (ctest/LoopgatePython.cmake: loopgate_py_stack, built against the Python that will run the user's program).
function(loopgate_add_cupti_targets)
  add_library(loopgate_sync_inject SHARED ${PROJECT_SOURCE_DIR}/tools/cupti/sync_inject.cpp
                                          ${PROJECT_SOURCE_DIR}/tools/cupti/sync_region.cpp
                                          ${PROJECT_SOURCE_DIR}/tools/cupti/sync_sites.cpp
                                          ${PROJECT_SOURCE_DIR}/tools/cupti/sync_report.cpp
                                          ${PROJECT_SOURCE_DIR}/tools/cupti/sync_kind.cpp
                                          ${PROJECT_SOURCE_DIR}/tools/cupti/alternating_iterations.cpp
                                          ${PROJECT_SOURCE_DIR}/trainer/measure/cupti_core.cpp)
  target_include_directories(loopgate_sync_inject PRIVATE ${PROJECT_SOURCE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(loopgate_sync_inject PRIVATE loopgate_py_stack nlohmann_json::nlohmann_json CUDA::cupti
                                                     CUDA::cuda_driver ${CMAKE_DL_LIBS})
  set_target_properties(loopgate_sync_inject PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools/cupti)
endfunction()

function(loopgate_add_nccl_smoke)
  if(NOT LOOPGATE_NCCL_LIBRARY OR NOT LOOPGATE_NCCL_INCLUDE)
    message(STATUS "loopgate: NCCL not found: loopgate_nccl_smoke not built")
    return()
  endif()
  add_executable(loopgate_nccl_smoke ${PROJECT_SOURCE_DIR}/tools/nccl_smoke/nccl_smoke.cpp)
  target_include_directories(loopgate_nccl_smoke PRIVATE ${LOOPGATE_NCCL_INCLUDE})
  target_link_libraries(loopgate_nccl_smoke PRIVATE MPI::MPI_CXX CUDA::cudart ${LOOPGATE_NCCL_LIBRARY})
  set_target_properties(loopgate_nccl_smoke PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tools)
endfunction()

if(LOOPGATE_CUDA)
  if(NOT TARGET CUDA::cupti OR NOT LOOPGATE_NCCL_LIBRARY)
    message(FATAL_ERROR "loopgate: LOOPGATE_CUDA=ON needs CUPTI and NCCL (nccl: ${LOOPGATE_NCCL_LIBRARY})")
  endif()
  # The digests' kernel (trainer/measure/digest_hash.cu): a plain CUDA unit, no LibTorch header, its own target so
  # LibTorch's interface flags never reach nvcc. sm_90 (H100/H200) unless LOOPGATE_CUDA_ARCHITECTURES says otherwise.
  enable_language(CUDA)
  set(LOOPGATE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures of loopgate's own kernels")
  add_library(loopgate_digest_kernel STATIC ${PROJECT_SOURCE_DIR}/trainer/measure/digest_hash.cu)
  target_include_directories(loopgate_digest_kernel PRIVATE ${PROJECT_SOURCE_DIR})
  set_target_properties(loopgate_digest_kernel PROPERTIES CUDA_ARCHITECTURES "${LOOPGATE_CUDA_ARCHITECTURES}"
                                                          CUDA_STANDARD 17 POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(loopgate_trainer PUBLIC loopgate_digest_kernel)
  target_sources(loopgate_trainer PRIVATE ${LOOPGATE_CUPTI_SOURCES}
                 ${PROJECT_SOURCE_DIR}/trainer/measure/digests_cuda.cpp
                 ${PROJECT_SOURCE_DIR}/trainer/parallel/comm_nccl.cpp
                 ${PROJECT_SOURCE_DIR}/trainer/timers/device_cuda.cpp
                 ${PROJECT_SOURCE_DIR}/trainer/capture/capture_cuda.cpp
                 ${PROJECT_SOURCE_DIR}/trainer/measure/async_copy_cuda.cpp)
  target_include_directories(loopgate_trainer PUBLIC ${CUDAToolkit_INCLUDE_DIRS} ${LOOPGATE_NCCL_INCLUDE})
  target_link_libraries(loopgate_trainer PUBLIC CUDA::cupti CUDA::cuda_driver CUDA::cudart ${LOOPGATE_NCCL_LIBRARY})
  target_compile_definitions(loopgate_trainer PUBLIC LOOPGATE_HAS_CUDA=1)
  loopgate_add_cupti_targets()
  loopgate_add_nccl_smoke()
  message(STATUS "loopgate: GPU tier ON (CUDA ${CUDAToolkit_VERSION}, NCCL ${LOOPGATE_NCCL_LIBRARY})")
elseif(CUDAToolkit_FOUND AND TARGET CUDA::cupti AND LOOPGATE_CUDA_COMPILE_ONLY)
  # Compile-only: no LibTorch, no trainer link. The counter core needs fmt (error.h) and nothing heavy.
  add_library(loopgate_cupti_compile_check OBJECT ${LOOPGATE_CUPTI_SOURCES})
  target_include_directories(loopgate_cupti_compile_check PRIVATE ${PROJECT_SOURCE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(loopgate_cupti_compile_check PRIVATE fmt::fmt)
  loopgate_add_cupti_targets()
  loopgate_add_nccl_smoke()
  message(STATUS "loopgate: CUDA toolkit ${CUDAToolkit_VERSION} found: GPU-tier sources compiled, not run "
                 "(LOOPGATE_CUDA=OFF)")
else()
  message(STATUS "loopgate: no CUDA toolkit: GPU tier skipped (LOOPGATE_CUDA=OFF)")
endif()
