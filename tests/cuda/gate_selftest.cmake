# Self-test of the build gate cuda/tools/check_resources.cmake: synthetic ptxas reports, each of
# which must pass the gate or fail it with the message that names its fault. Runs everywhere
# (plain CMake, no CUDA): a gate that stopped firing would otherwise let spills, oversized
# shared memory or serialized wgmma land unnoticed in a build that still says "passed".
# usage: cmake -DGATE=.../check_resources.cmake -DWORK=<scratch dir> -P gate_selftest.cmake
file(MAKE_DIRECTORY "${WORK}")
set(sm120_entry "ptxas info    : Compiling entry function '_ZN9mlaverify4cuda6detail14verify_partialILi2ELi64EEEvNS1_11PartialArgsE' for 'sm_120'\n")
set(sm90a_entry "ptxas info    : Compiling entry function '_ZN9mlaverify4cuda6detail20verify_partial_wgmmaENS1_11PartialArgsE' for 'sm_90a'\n")
set(no_spill "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n")
set(used "ptxas info    : Used 253 registers, used 1 barriers\n")
set(clean "${sm120_entry}${no_spill}${used}")
set(failures "")

# expect: "pass", or a substring the gate's failure message must contain.
function(gate_case name expect)
  set(reports "")
  foreach(i RANGE 2 ${ARGC})
    if(i LESS ARGC)
      file(WRITE "${WORK}/${name}_${i}.ptxas.txt" "${ARGV${i}}")
      list(APPEND reports "${WORK}/${name}_${i}.ptxas.txt")
    endif()
  endforeach()
  if(name STREQUAL "missing_report")
    set(reports "${WORK}/does_not_exist.ptxas.txt")
  endif()
  list(JOIN reports "|" reports_arg)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -DREPORTS=${reports_arg} -DDYN=100352 -DLIMIT=101376
            -DREQUIRE_SM120=ON -P ${GATE}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(expect STREQUAL "pass")
    if(NOT rc EQUAL 0)
      set(failures "${failures}${name}: expected to pass, failed: ${err}\n" PARENT_SCOPE)
    endif()
  else()
    if(rc EQUAL 0)
      set(failures "${failures}${name}: expected to fail (${expect}), passed\n" PARENT_SCOPE)
    elseif(NOT err MATCHES "${expect}")
      set(failures "${failures}${name}: failed without naming '${expect}': ${err}\n" PARENT_SCOPE)
    endif()
  endif()
endfunction()

gate_case(clean pass "${clean}")
# 1,024 bytes of static smem on top of the 100,352 requested: 101,376 exactly, still allowed.
gate_case(smem_at_limit pass
  "${sm120_entry}${no_spill}ptxas info    : Used 253 registers, used 1 barriers, 1024 bytes smem\n")
gate_case(smem_over "101377 bytes smem > 101376"
  "${sm120_entry}${no_spill}ptxas info    : Used 253 registers, used 1 barriers, 1025 bytes smem\n")
gate_case(spill "spills 12 bytes stored, 16 loaded"
  "${sm120_entry}    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n${used}")
gate_case(wgmma_serialized "ptxas C7515"
  "${clean}ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'f'\n${sm90a_entry}${no_spill}${used}")
gate_case(setmaxnreg_ignored "ptxas C7507"
  "${clean}ptxas info    : (C7507) Potential Performance Loss: 'setmaxnreg' ignored to maintain minimum register requirements.\n")
gate_case(no_sm120_entry "would pass vacuously" "${sm90a_entry}${no_spill}${used}")
# The warp-specialized experiment (NOTES v30) builds for sm_120a: held to sm_120's limit, and
# counted as an sm_120 entry.
set(ws120a_entry "ptxas info    : Compiling entry function '_ZN9mlaverify4cuda6detail17verify_partial_wsILi6ELi4EEEvNS1_11PartialArgsE' for 'sm_120a'\n")
gate_case(sm120a_clean pass "${ws120a_entry}${no_spill}${used}")
gate_case(sm120a_smem_over "101377 bytes smem > 101376"
  "${ws120a_entry}${no_spill}ptxas info    : Used 168 registers, used 5 barriers, 1025 bytes smem\n")
gate_case(sm120a_unknown_ring "dynamic request is unknown"
  "${clean}ptxas info    : Compiling entry function '_ZN9mlaverify4cuda6detail17verify_partial_wsILi3ELi3EEEvNS1_11PartialArgsE' for 'sm_120a'\n${no_spill}${used}")
# MLAV_RESOURCE_CHECK=warn (experiment builds): the failure is printed, the check passes.
set(ENV{MLAV_RESOURCE_CHECK} warn)
gate_case(warn_mode pass
  "${sm120_entry}    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n${used}")
unset(ENV{MLAV_RESOURCE_CHECK})
gate_case(spill_after_warn "spills 12 bytes stored, 16 loaded"
  "${sm120_entry}    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n${used}")
gate_case(missing_report "missing resource report")

if(NOT failures STREQUAL "")
  message(FATAL_ERROR "resource gate self-test:\n${failures}")
endif()
message(STATUS "resource gate self-test: 13 cases as expected")
