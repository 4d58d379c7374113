# Writes the manual page and the bash completion from the built program's own command
# line: cmake -DPIPESIM=<program> -DOUT=<dir> -P write_docs.cmake
file(MAKE_DIRECTORY ${OUT}/man/man1 ${OUT}/bash-completion/completions)
execute_process(COMMAND ${PIPESIM} man OUTPUT_FILE ${OUT}/man/man1/pipesim.1
                RESULT_VARIABLE man_rc)
execute_process(COMMAND ${PIPESIM} completion bash
                OUTPUT_FILE ${OUT}/bash-completion/completions/pipesim RESULT_VARIABLE bash_rc)
if(NOT man_rc EQUAL 0 OR NOT bash_rc EQUAL 0)
  message(FATAL_ERROR "pipesim man / completion failed (${man_rc}, ${bash_rc})")
endif()
