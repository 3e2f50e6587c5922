# cmake -DMODE=find_package|subdirectory -DMLAV_SOURCE=... -DMLAV_BUILD=... -DPROJECT=...
#       -DWORK=... [-DGENERATOR=...] [-DCXX=...] [-DLAUNCHER=a|b] [-DBUILD_TYPE=...]
#       -P consume.cmake
# Configures, builds and runs the outside project PROJECT against mlaverify (tests/consume/
# CMakeLists.txt says what each mode proves). WORK is wiped first: every run is a fresh configure.
cmake_minimum_required(VERSION 3.25)
foreach(v MODE MLAV_SOURCE MLAV_BUILD PROJECT WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "consume.cmake: -D${v}=... is required")
  endif()
endforeach()
if(NOT BUILD_TYPE)
  set(BUILD_TYPE Release)
endif()
string(REPLACE "|" ";" LAUNCHER "${LAUNCHER}")
if(DEFINED ENV{MLAV_JOBS})
  set(jobs $ENV{MLAV_JOBS})
else()
  cmake_host_system_information(RESULT jobs QUERY NUMBER_OF_LOGICAL_CORES)
endif()

string(TIMESTAMP t0 "%s")
function(step what)
  string(TIMESTAMP t "%s")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  string(TIMESTAMP t1 "%s")
  math(EXPR dt "${t1} - ${t}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consume (${MODE}): ${what} failed (${rc}) after ${dt} s:\n${out}")
  endif()
  message(STATUS "consume (${MODE}): ${what}: ${dt} s")
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(configure ${CMAKE_COMMAND} -S ${PROJECT} -B ${WORK}/build -DCMAKE_BUILD_TYPE=${BUILD_TYPE})
if(GENERATOR)
  list(APPEND configure -G ${GENERATOR})
endif()
if(CXX)
  list(APPEND configure -DCMAKE_CXX_COMPILER=${CXX})
endif()
if(LAUNCHER)
  list(JOIN LAUNCHER ";" launcher_arg)
  list(APPEND configure "-DCMAKE_CXX_COMPILER_LAUNCHER=${launcher_arg}")
endif()

if(MODE STREQUAL "find_package")
  # The package exactly as `cmake --install` lays it out, from this (already built) build tree.
  step("cmake --install into ${WORK}/prefix"
       ${CMAKE_COMMAND} --install ${MLAV_BUILD} --prefix ${WORK}/prefix --config ${BUILD_TYPE})
  foreach(f lib/cmake/mlaverify/mlaverifyConfig.cmake include/mlaverify/verify_params.h
            include/mlaverify-layers/model/batch.h include/mlaverify-layers/cpu/cpu_backend.h)
    if(NOT EXISTS ${WORK}/prefix/${f})
      message(FATAL_ERROR "consume (find_package): the install lacks ${f}")
    endif()
  endforeach()
  list(APPEND configure -DMLAV_CONSUME_MODE=find_package -DCMAKE_PREFIX_PATH=${WORK}/prefix)
elseif(MODE STREQUAL "subdirectory")
  # The test and tool dependencies must not be needed by a consumer: hide them.
  list(APPEND configure -DMLAV_CONSUME_MODE=subdirectory -DMLAVERIFY_SOURCE_DIR=${MLAV_SOURCE}
       -DMLAV_WITH_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
       -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON)
else()
  message(FATAL_ERROR "consume.cmake: MODE is find_package or subdirectory, not '${MODE}'")
endif()

step("configure" ${configure})
step("build" ${CMAKE_COMMAND} --build ${WORK}/build --config ${BUILD_TYPE} --target mlav_consumer
     -j ${jobs})
find_program(consumer mlav_consumer PATHS ${WORK}/build ${WORK}/build/${BUILD_TYPE} NO_DEFAULT_PATH)
if(NOT consumer)
  message(FATAL_ERROR "consume (${MODE}): no mlav_consumer executable under ${WORK}/build")
endif()
step("run" ${consumer})
message("${step_output}")
string(TIMESTAMP t1 "%s")
math(EXPR dt "${t1} - ${t0}")
message(STATUS "consume (${MODE}): passed in ${dt} s")
