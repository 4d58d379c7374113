# ctest driver: installs the build tree into a fresh prefix, then configures, builds and runs
# the consumer project (this folder) against it with find_package(pipesim).
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX=... -P install_test.cmake
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

step(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(installed bin/pipesim include/pipesim/api/pipesim.h share/pipesim/scenarios/default.yaml)
  if(NOT EXISTS ${prefix}/${installed})
    message(FATAL_ERROR "not installed: ${installed}")
  endif()
endforeach()
# The one public header, and no internal one beside it.
file(GLOB_RECURSE headers RELATIVE ${prefix} ${prefix}/include/*)
if(NOT headers STREQUAL "include/pipesim/api/pipesim.h")
  message(FATAL_ERROR "installed headers: ${headers} (only include/pipesim/api/pipesim.h is public)")
endif()
file(GLOB_RECURSE config ${prefix}/*/pipesimConfig.cmake)
file(GLOB_RECURSE version ${prefix}/*/pipesimConfigVersion.cmake)
if(NOT config OR NOT version)
  message(FATAL_ERROR "pipesimConfig.cmake or its version file is not installed")
endif()
# The installed tree must not point back into the source or build tree.
file(GLOB_RECURSE targets ${prefix}/*/pipesimTargets*.cmake)
foreach(f IN LISTS targets)
  file(READ ${f} text)
  string(FIND "${text}" "${BUILD_DIR}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${f} names the build tree")
  endif()
endforeach()

get_filename_component(source ${CMAKE_SCRIPT_MODE_FILE} DIRECTORY)
step(${CMAKE_COMMAND} -S ${source} -B ${WORK_DIR}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=Release
     -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER}
     -DCMAKE_PREFIX_PATH=${prefix})
step(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
step(${WORK_DIR}/build/consumer)
message(STATUS "${step_output}")
file(REMOVE_RECURSE ${WORK_DIR})
