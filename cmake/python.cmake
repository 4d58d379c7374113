# The Python module (python/), when pybind11 and Python's headers are found.
# Debian's interpreter is preferred whatever `python3` on PATH is (a pyenv shim, say, has
# neither Debian's headers nor its packages); -DPython3_EXECUTABLE=... picks another.
# Not in sanitizer builds: an instrumented module cannot load into an uninstrumented
# interpreter (the Release build tests it).
if(NOT PIPESIM_PYTHON OR PIPESIM_SANITIZE)
  return()
endif()
if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 3.8 COMPONENTS Interpreter Development.Module)
if(Python3_FOUND)
  find_package(pybind11 2.6 CONFIG QUIET)
endif()
if(NOT Python3_FOUND OR NOT pybind11_FOUND)
  message(STATUS "pipesim: the Python module is not built (Debian: python3-dev pybind11-dev)")
  return()
endif()
# Installed where the interpreter looks under the install prefix: Debian's
# lib/python3.X/dist-packages (on sys.path for /usr/local), elsewhere site-packages.
execute_process(COMMAND ${Python3_EXECUTABLE} -c "import sysconfig; print(sysconfig.get_path('platlib'))"
                OUTPUT_VARIABLE pipesim_platlib OUTPUT_STRIP_TRAILING_WHITESPACE)
if(pipesim_platlib MATCHES "dist-packages$")
  set(pipesim_site dist-packages)
else()
  set(pipesim_site site-packages)
endif()
set(PIPESIM_PYTHON_INSTALL_DIR
    "lib/python${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}/${pipesim_site}"
    CACHE STRING "Where `cmake --install` puts the Python module, relative to the prefix")
add_subdirectory(python)
