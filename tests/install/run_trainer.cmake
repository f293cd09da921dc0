# Runs the installed package's C++ trainer on fresh MNIST-format data,
# in-process and with its front on one local worker (found beside the
# installed libsluice). -DPREFIX= -DTRAINER= -DWORK=
function(run expect)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "${expect}")
    message(FATAL_ERROR "failed (${rc}), expected '${expect}': ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()

file(REMOVE_RECURSE ${WORK})
run("wrote 3000 MNIST samples" ${PREFIX}/bin/sluice make-data mnist --out ${WORK} --count 3000)
run("metrics on http://127.0.0.1:[0-9]+/metrics.*epoch 1: 3000 samples" ${TRAINER} --mnist ${WORK} --epochs 2
    --metrics-port 0)
run("epoch 0: 3000 samples.*" ${CMAKE_COMMAND} -E env --unset=SLUICE_BINARY PATH=/usr/bin:/bin
    ${TRAINER} --mnist ${WORK} --epochs 1 --workers 1)
