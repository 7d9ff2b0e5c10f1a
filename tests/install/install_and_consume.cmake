# cmake -P script: install, configure the consumer against the install, build, run.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${name}: ok")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

# STATIC=ON: the install must be a static one (and the consumer must load
# no costate library). With COSTATE_SOURCE_DIR, first configure and build
# costate itself with BUILD_SHARED_LIBS=OFF from there (what is installed; no
# tests, no benchmarks), with the compiler launcher of the calling build.
if(STATIC AND COSTATE_SOURCE_DIR)
  set(COSTATE_BINARY_DIR ${WORK_DIR}/costate-static)
  step("configure static costate" ${CMAKE_COMMAND} -S ${COSTATE_SOURCE_DIR} -B ${COSTATE_BINARY_DIR}
       -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DBUILD_SHARED_LIBS=OFF
       -DCOSTATE_BUILD_TESTS=OFF -DCOSTATE_BUILD_BENCHMARKS=OFF
       "-DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}"
       "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}")
  step("build static costate" ${CMAKE_COMMAND} --build ${COSTATE_BINARY_DIR} -j ${JOBS})
endif()

step("install" ${CMAKE_COMMAND} --install ${COSTATE_BINARY_DIR} --prefix ${prefix})
foreach(f include/costate/costate.hpp include/costate/config.hpp
          lib/cmake/costate/costateConfig.cmake bin/costate)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
# Which kind of library was installed: the archives and no shared costate
# library after a static build, and the reverse.
file(GLOB shared_libraries ${prefix}/lib*/libcostate*.so*)
file(GLOB static_libraries ${prefix}/lib*/libcostate*.a)
list(LENGTH shared_libraries n_shared)
list(LENGTH static_libraries n_static)
if(STATIC AND NOT (n_static EQUAL 2 AND n_shared EQUAL 0))
  message(FATAL_ERROR "static install: expected libcostate.a and libcostate_petsc.a and no "
                      "shared costate library, found: ${static_libraries} ${shared_libraries}")
endif()
message(STATUS "installed: ${n_shared} shared, ${n_static} static costate libraries")
step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
     # The library's own compile and link flags (e.g. scripts/sanitize.sh's
     # -fsanitize=…): a consumer of a sanitized libcostate must link the
     # sanitizer runtime too, or it crashes at start-up.
     "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}")
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(STATIC AND READELF)
  # The consumer carries costate in itself: no costate library to load.
  step("readelf consumer" ${READELF} -d ${WORK_DIR}/build/consumer)
  if(step_output MATCHES "NEEDED[^\n]*libcostate")
    message(FATAL_ERROR "the consumer of a static install loads a costate library:\n${step_output}")
  endif()
endif()
step("run consumer" ${WORK_DIR}/build/consumer)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer did not report success")
endif()
