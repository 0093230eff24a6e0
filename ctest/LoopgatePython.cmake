# The Python frame walker of the sync counter (tools/cupti/py_stack.h), as a static library of position-independent
# code. It reads CPython's internal frame layout, so it is compiled against the headers of the Python that runs the
# user's program: Python3_EXECUTABLE (or the python3 on PATH). Without headers of CPython 3.11 or 3.12 a stand-in
# says why no Python site can be named (the counter falls back to NVTX ranges and native frames).
find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
if(Python3_Development.Module_FOUND)
  find_path(_py_internal internal/pycore_frame.h HINTS ${Python3_INCLUDE_DIRS} NO_DEFAULT_PATH NO_CACHE)
endif()
set(LOOPGATE_PY_STACK_READS_FRAMES OFF)
if(_py_internal AND NOT _py_internal MATCHES "NOTFOUND" AND Python3_VERSION VERSION_GREATER_EQUAL 3.11 AND Python3_VERSION VERSION_LESS 3.13)
  set(LOOPGATE_PY_STACK_READS_FRAMES ON)
  add_library(loopgate_py_stack STATIC ${PROJECT_SOURCE_DIR}/tools/cupti/py_stack.cpp)
  target_include_directories(loopgate_py_stack PRIVATE ${Python3_INCLUDE_DIRS})
  message(STATUS "loopgate: the sync counter names Python sites of CPython ${Python3_VERSION} (${Python3_INCLUDE_DIRS})")
else()
  add_library(loopgate_py_stack STATIC ${PROJECT_SOURCE_DIR}/tools/cupti/py_stack_none.cpp)
  target_compile_definitions(loopgate_py_stack PRIVATE
                             LOOPGATE_PY_STACK_WHY="built without the internal headers of CPython 3.11 or 3.12")
  message(STATUS "loopgate: no CPython 3.11/3.12 internal headers: the sync counter names no Python site")
endif()
target_include_directories(loopgate_py_stack PUBLIC ${PROJECT_SOURCE_DIR})
target_link_libraries(loopgate_py_stack PUBLIC ${CMAKE_DL_LIBS})
set_target_properties(loopgate_py_stack PROPERTIES POSITION_INDEPENDENT_CODE ON)

# The Python shim that marks iterations (`loopgate syncs`) and injects NaNs (`loopgate pair`), beside the tools.
foreach(_shim sitecustomize.py loopgate_nan.py loopgate_values.py)
  configure_file(${PROJECT_SOURCE_DIR}/tools/cupti/loopgate_pyshim/${_shim}
                 ${CMAKE_BINARY_DIR}/tools/cupti/loopgate_pyshim/${_shim} COPYONLY)
endforeach()
