# Third-party dependencies: GoogleTest (+gmock), nlohmann_json, fmt, CLI11, Google Benchmark (optional). In this
# order: the system packages (Debian CPU CI); LOOPGATE_VENDOR_DIR (a folder holding include/{nlohmann,CLI,fmt}, the
# googletest sources in googletest/ and a prebuilt benchmark/{include,lib}); else GoogleTest, nlohmann_json and
# CLI11 by FetchContent at the versions pinned below, Debian 12's, which the CPU CI builds against. A runner with
# no network gives their sources by FETCHCONTENT_SOURCE_DIR_GOOGLETEST, _NLOHMANN_JSON and _CLI11 (each the root of
# that project's source tree: googletest's CMakeLists.txt, json's and CLI11's include/); nothing is downloaded then.
#
# fmt on the GPU tier: torch >= 2.11 puts its own fmt (v12) headers on the include path ahead of the system's,
# so code compiled against them must not link the system libfmt (another major version). LOOPGATE_CUDA builds
# therefore use fmt header-only (FMT_HEADER_ONLY) with whichever headers come first.
set(LOOPGATE_VENDOR_DIR "" CACHE PATH "Folder with vendored headers (include/) and googletest sources")

include(FetchContent)
FetchContent_Declare(googletest GIT_REPOSITORY https://github.com/google/googletest.git GIT_TAG release-1.12.1
                     GIT_SHALLOW TRUE)
# Header-only: populated, not added (no CMakeLists.txt under SOURCE_SUBDIR); the target is made below.
FetchContent_Declare(nlohmann_json GIT_REPOSITORY https://github.com/nlohmann/json.git GIT_TAG v3.11.2
                     GIT_SHALLOW TRUE SOURCE_SUBDIR loopgate-headers-only)
FetchContent_Declare(cli11 GIT_REPOSITORY https://github.com/CLIUtils/CLI11.git GIT_TAG v2.1.2
                     GIT_SHALLOW TRUE SOURCE_SUBDIR loopgate-headers-only)

if(LOOPGATE_VENDOR_DIR AND EXISTS "${LOOPGATE_VENDOR_DIR}/googletest/CMakeLists.txt")
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
  add_subdirectory(${LOOPGATE_VENDOR_DIR}/googletest ${CMAKE_BINARY_DIR}/_vendor_googletest EXCLUDE_FROM_ALL)
  message(STATUS "loopgate: GoogleTest from ${LOOPGATE_VENDOR_DIR}/googletest")
else()
  find_package(GTest QUIET)
  if(NOT TARGET GTest::gtest)
    set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
    set(BUILD_GMOCK ON CACHE BOOL "" FORCE)
    FetchContent_MakeAvailable(googletest)
    message(STATUS "loopgate: GoogleTest by FetchContent from ${googletest_SOURCE_DIR}")
  endif()
endif()
if(NOT TARGET GTest::gtest)  # googletest >= 1.11 defines these aliases itself
  add_library(GTest::gtest ALIAS gtest)
  add_library(GTest::gmock ALIAS gmock)
endif()

# A header-only target from the vendor folder, else by FetchContent (fetch_name, its include/ folder). fmt has no
# FetchContent entry (LibTorch brings its headers): it is looked for on the default paths too.
function(loopgate_header_only target header fetch_name)
  if(fetch_name)
    if(LOOPGATE_VENDOR_DIR)
      find_path(_inc ${header} PATHS ${LOOPGATE_VENDOR_DIR}/include NO_DEFAULT_PATH NO_CACHE)
    endif()
  else()
    find_path(_inc ${header} HINTS ${LOOPGATE_VENDOR_DIR}/include NO_CACHE)
  endif()
  if(NOT _inc AND fetch_name)
    FetchContent_MakeAvailable(${fetch_name})
    set(_inc ${${fetch_name}_SOURCE_DIR}/include)
  endif()
  if(NOT _inc OR NOT EXISTS "${_inc}/${header}")
    message(FATAL_ERROR "loopgate: ${header} not found: install the package, set LOOPGATE_VENDOR_DIR or FETCHCONTENT_SOURCE_DIR_*")
  endif()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_inc}")
  message(STATUS "loopgate: ${target} header-only from ${_inc}")
endfunction()

find_package(nlohmann_json 3 QUIET)
if(NOT TARGET nlohmann_json::nlohmann_json)
  loopgate_header_only(nlohmann_json::nlohmann_json nlohmann/json.hpp nlohmann_json)
endif()

if(LOOPGATE_CUDA)
  add_library(loopgate_fmt_header_only INTERFACE)
  target_compile_definitions(loopgate_fmt_header_only INTERFACE FMT_HEADER_ONLY=1)
  if(LOOPGATE_VENDOR_DIR)
    target_include_directories(loopgate_fmt_header_only SYSTEM INTERFACE ${LOOPGATE_VENDOR_DIR}/include)
  endif()
  add_library(fmt::fmt ALIAS loopgate_fmt_header_only)
else()
  find_package(fmt QUIET)
  if(NOT TARGET fmt::fmt)
    loopgate_header_only(fmt::fmt fmt/format.h "")
    set_property(TARGET fmt::fmt APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
  endif()
endif()

find_package(CLI11 QUIET)
if(NOT TARGET CLI11::CLI11)
  loopgate_header_only(CLI11::CLI11 CLI/CLI.hpp cli11)
endif()

# Google Benchmark (suites/bench): the system's, else a prebuilt copy in LOOPGATE_VENDOR_DIR/benchmark — Debian's
# headers and shared library (docs/bench.md, "Vendored Google Benchmark"), found at run time through the build
# tree's rpath. Neither: suites/bench is not built.
find_package(benchmark QUIET)
if(NOT TARGET benchmark::benchmark AND LOOPGATE_VENDOR_DIR)
  set(_bm ${LOOPGATE_VENDOR_DIR}/benchmark)
  file(GLOB _bm_libs ${_bm}/lib/libbenchmark.so.*)
  if(EXISTS ${_bm}/include/benchmark/benchmark.h AND _bm_libs)
    list(GET _bm_libs 0 _bm_lib)  # stored under its soname (libbenchmark.so.1debian): what the binary will ask for
    add_library(benchmark::benchmark SHARED IMPORTED GLOBAL)
    set_target_properties(benchmark::benchmark PROPERTIES IMPORTED_LOCATION ${_bm_lib}
                          INTERFACE_INCLUDE_DIRECTORIES ${_bm}/include)
    message(STATUS "loopgate: Google Benchmark from ${_bm_lib}")
  endif()
endif()
if(NOT TARGET benchmark::benchmark)
  message(STATUS "loopgate: no Google Benchmark (libbenchmark-dev or LOOPGATE_VENDOR_DIR/benchmark): suites/bench not built")
endif()
