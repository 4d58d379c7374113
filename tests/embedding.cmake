# Tests of what embeds pipesim: the Python module, the installed CMake package, the plots.

# The Python module against the command line, with the interpreter it was built for.
if(TARGET pipesim_python)
  add_test(NAME Python.Module
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_pipesim.py -v)
  set_tests_properties(Python.Module PROPERTIES TIMEOUT 300 ENVIRONMENT
    "PYTHONPATH=${CMAKE_BINARY_DIR};PIPESIM=$<TARGET_FILE:pipesim>;PIPESIM_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()

# cmake --install into a temporary prefix, then a one-file project with find_package(pipesim).
# Not in sanitizer builds: the consumer would link instrumented libraries without the
# sanitizer runtime (the Release build tests it).
if(NOT PIPESIM_SANITIZE)
  add_test(NAME Package.FindPackageConsumer
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR}
                   -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-work -DGENERATOR=${CMAKE_GENERATOR}
                   -DCXX=${CMAKE_CXX_COMPILER} -DLAUNCHER=${CMAKE_CXX_COMPILER_LAUNCHER}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/install_test.cmake)
  set_tests_properties(Package.FindPackageConsumer PROPERTIES TIMEOUT 600 RUN_SERIAL TRUE)
endif()

# Every plot script renders from small reports (skipped without matplotlib).
if(Python3_EXECUTABLE)
  add_test(NAME Plots.RenderFromSmallReports
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/python/test_plots.py -v)
  set_tests_properties(Plots.RenderFromSmallReports PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "PIPESIM=$<TARGET_FILE:pipesim>;PIPESIM_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
endif()
