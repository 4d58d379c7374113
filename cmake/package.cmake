# `cmake --install`: the pipesim program, the libraries with the one public header, the
# scenarios, the Python module (python/CMakeLists.txt) and a CMake package, so that another
# project can write
#   find_package(pipesim 0.1 REQUIRED)
#   target_link_libraries(app PRIVATE pipesim::pipesim)   # #include <pipesim/api/pipesim.h>
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(PIPESIM_LIBRARIES pipesim_core pipesim_topology pipesim_schedules pipesim_sim pipesim_costs pipesim_scenario pipesim_backend
    pipesim_parallel pipesim_planner pipesim_sweep pipesim_api)
foreach(lib IN LISTS PIPESIM_LIBRARIES)
  # In the build, headers include each other as "sim/report.h" from the source tree; once
  # installed only <pipesim/api/pipesim.h> is there, and it includes the standard library only.
  set_target_properties(${lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES
    "$<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>;$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
endforeach()
set_target_properties(pipesim_api PROPERTIES EXPORT_NAME pipesim)

install(TARGETS pipesim RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS ${PIPESIM_LIBRARIES} EXPORT pipesimTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES api/pipesim.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipesim/api)
if(TARGET pipesim_cuda_plugin)  # opened by --backend cuda (backend/cuda_plugin.cc)
  install(TARGETS pipesim_cuda_plugin LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/pipesim)
endif()
install(DIRECTORY scenarios/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pipesim/scenarios)
install(FILES LICENSE README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
if(NOT CMAKE_CROSSCOMPILING)  # written after each build (apps/CMakeLists.txt)
  install(FILES ${CMAKE_BINARY_DIR}/share/man/man1/pipesim.1
          DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  install(FILES ${CMAKE_BINARY_DIR}/share/bash-completion/completions/pipesim
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
endif()

set(pipesim_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/pipesim)
install(EXPORT pipesimTargets NAMESPACE pipesim:: DESTINATION ${pipesim_cmake_dir})
set(PIPESIM_WITH_MPI ${MPI_CXX_FOUND})  # the static libraries then link MPI
configure_package_config_file(cmake/pipesimConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/pipesimConfig.cmake
                              INSTALL_DESTINATION ${pipesim_cmake_dir}
                              PATH_VARS CMAKE_INSTALL_DATADIR)
# 0.x: a minor version may change the API.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/pipesimConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/pipesimConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/pipesimConfigVersion.cmake
        DESTINATION ${pipesim_cmake_dir})
