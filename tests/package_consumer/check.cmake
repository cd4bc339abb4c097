# Run by ctest: install the built library to a scratch prefix, build a user project against it, and
# run the installed programs the way a user would: from the prefix, without LD_LIBRARY_PATH.
file(REMOVE_RECURSE "${FLT_WORK_DIR}")
set(prefix "${FLT_WORK_DIR}/prefix")
function(run_step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "step failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run_step(${CMAKE_COMMAND} --install "${FLT_BUILD_DIR}" --prefix "${prefix}")
run_step(${CMAKE_COMMAND} -S "${FLT_CONSUMER_DIR}" -B "${FLT_WORK_DIR}/build"
         -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run_step(${CMAKE_COMMAND} --build "${FLT_WORK_DIR}/build")
run_step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${FLT_WORK_DIR}/build/consumer")

# Every program the build installs is in bin/ (FLT_PROGRAMS, the demos and flt-lab) and every
# program in bin/ starts: flt-info runs to the end, the others print their --help (without the
# install RPATH each of them stops in the loader: "libflt.so.0: cannot open shared object file").
foreach(program IN LISTS FLT_PROGRAMS)
  if(NOT EXISTS "${prefix}/${FLT_BINDIR}/${program}")
    message(FATAL_ERROR "${program} was not installed (expected ${prefix}/${FLT_BINDIR}/${program})")
  endif()
endforeach()
file(GLOB programs "${prefix}/${FLT_BINDIR}/*")
foreach(path IN LISTS programs)
  get_filename_component(program "${path}" NAME)
  if(program STREQUAL "flt-info")
    run_step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${path}")
  else()
    run_step(${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${path}" --help)
  endif()
endforeach()
