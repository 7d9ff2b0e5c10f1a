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

step("install" ${CMAKE_COMMAND} --install ${COSTATE_BINARY_DIR} --prefix ${prefix})
foreach(f include/costate/costate.hpp include/costate/config.hpp
          lib/cmake/costate/costateConfig.cmake bin/costate)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "install is missing ${f}")
  endif()
endforeach()
step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
     -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=${BUILD_TYPE}
     # The library's own compile and link flags (e.g. scripts/sanitize.sh's
     # -fsanitize=…): a consumer of a sanitized libcostate must link the
     # sanitizer runtime too, or it crashes at start-up.
     "-DCMAKE_CXX_FLAGS=${CONSUMER_CXX_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${CONSUMER_LINKER_FLAGS}")
step("build consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step("run consumer" ${WORK_DIR}/build/consumer)
message(STATUS "${step_output}")
if(NOT step_output MATCHES "consumer: ok")
  message(FATAL_ERROR "consumer did not report success")
endif()
