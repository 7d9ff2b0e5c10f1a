# cmake -P script (issue 36): the PETSc cut cannot regress.
#   1. libcostate references no symbol of libcostate_petsc (costate::…) and
#      none of PETSc (Petsc*, KSP*, DM*, Mat*, Vec*, Tao*, SNES*, PC*): every
#      such call goes through the PETSc module's table (solvers/petsc/module.hpp);
#   2. libcostate_petsc depends on libcostate, libcostate not on it;
#   3. with every symbol bound at load (LD_BIND_NOW=1) the front `costate`
#      starts (--version), runs a small ODE input and a sensitivity — without
#      mapping libcostate_petsc — and costate-petsc starts too.
# Arguments: -DNM= -DREADELF= -DCORE= -DPETSC_PART= -DFRONT= -DFULL= -DEXAMPLE= -DWORK_DIR=
cmake_minimum_required(VERSION 3.20)
function(run_checked out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "`${cmd}` failed (${rc}):\n${out}\n${err}")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

# 1. Symbols.
run_checked(core_undefined ${NM} -D --undefined-only ${CORE})
run_checked(part_defined ${NM} -D --defined-only ${PETSC_PART})
string(REGEX MATCHALL "[^\n]+" part_lines "${part_defined}")
set(part_costate "")
foreach(line IN LISTS part_lines)
  if(line MATCHES " [TDBR] (_ZN7costate[^ ]*|_ZNK7costate[^ ]*)$")
    list(APPEND part_costate "${CMAKE_MATCH_1}")
  endif()
endforeach()
list(LENGTH part_costate n_part)
if(n_part EQUAL 0)
  message(FATAL_ERROR "no costate symbol defined in ${PETSC_PART}: the check would be vacuous")
endif()
string(REGEX MATCHALL "[^\n]+" core_lines "${core_undefined}")
set(bad "")
foreach(line IN LISTS core_lines)
  string(REGEX REPLACE "^ *U +" "" sym "${line}")
  string(REGEX REPLACE "@.*$" "" sym "${sym}")
  if(sym IN_LIST part_costate)
    list(APPEND bad "${sym} (defined in libcostate_petsc)")
  elseif(sym MATCHES "^(Petsc|KSP|DM|Mat|Vec|Tao|SNES|PC|IS)[A-Z]")
    list(APPEND bad "${sym} (PETSc)")
  endif()
endforeach()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "libcostate references PETSc-side symbols; reach them through "
                      "petsc_module() (solvers/petsc/module.hpp) instead:\n  ${bad}")
endif()
message(STATUS "libcostate: no reference into libcostate_petsc (${n_part} costate symbols there) or PETSc")

# 2. Dependencies.
run_checked(core_dynamic ${READELF} -d ${CORE})
if(core_dynamic MATCHES "NEEDED[^\n]*(libcostate_petsc|libpetsc)")
  message(FATAL_ERROR "libcostate depends on ${CMAKE_MATCH_1}:\n${core_dynamic}")
endif()
run_checked(part_dynamic ${READELF} -d ${PETSC_PART})
if(NOT part_dynamic MATCHES "NEEDED[^\n]*libcostate\\.so")
  message(FATAL_ERROR "libcostate_petsc does not depend on libcostate:\n${part_dynamic}")
endif()

# 3. Loading with every symbol bound at start-up.
set(ENV{LD_BIND_NOW} 1)
run_checked(version ${FRONT} --version)
if(NOT version MATCHES "^costate [0-9]")
  message(FATAL_ERROR "costate --version printed: ${version}")
endif()
run_checked(version ${FULL} --version)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(ENV{LD_DEBUG} files)
foreach(command run sensitivity)
  run_checked(out ${FRONT} ${command} ${EXAMPLE} --json -o ${WORK_DIR}/${command}.h5)
  if(NOT out MATCHES "\"status\": *\"ok\"")
    message(FATAL_ERROR "costate ${command} under LD_BIND_NOW=1 did not report ok:\n${out}")
  endif()
  if(out MATCHES "libcostate_petsc")
    message(FATAL_ERROR "costate ${command} loaded libcostate_petsc")
  endif()
endforeach()
unset(ENV{LD_DEBUG})
message(STATUS "costate --version, run, sensitivity and costate-petsc --version load with LD_BIND_NOW=1")
