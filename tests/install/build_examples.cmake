# ctest fixture: installs the build into PREFIX and builds the examples
# against that install only. -DBUILD_DIR= -DPREFIX= -DEXAMPLES= -DOUT=
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()

file(REMOVE_RECURSE ${PREFIX})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX})
foreach(example cpp_trainer plugin_op)
  file(REMOVE_RECURSE ${OUT}/${example})
  # CMAKE_FIND_USE_PACKAGE_REGISTRY off and only PREFIX searched: nothing
  # from the build tree can stand in for the install.
  run(${CMAKE_COMMAND} -S ${EXAMPLES}/${example} -B ${OUT}/${example} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -Dsluice_DIR=${PREFIX}/lib/cmake/sluice)
  run(${CMAKE_COMMAND} --build ${OUT}/${example})
  message(STATUS "built ${example} against ${PREFIX}")
endforeach()
