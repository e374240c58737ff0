# Install rules (FA4_INSTALL, on when fa4rt is the top-level project):
#   lib/libfa4rt.so.X.Y.Z (+ .so.X, .so)   include/fa4/*.h*   bin/fa4rt (with FA4_BUILD_TOOLS)
#   lib/cmake/fa4rt/   fa4rtConfig.cmake, fa4rtConfigVersion.cmake, fa4rtTargets*.cmake  -> find_package(fa4rt)
#   lib/pkgconfig/fa4rt.pc                                                               -> pkg-config fa4rt
include(CMakePackageConfigHelpers)

set(FA4_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fa4rt)

install(TARGETS fa4rt EXPORT fa4rtTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fa4 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp")
install(FILES ${FA4_GENERATED_INCLUDE_DIR}/fa4/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/fa4
  COMPONENT development)

# The fa4rt tool is installed by tools/CMakeLists.txt (bin/fa4rt).
# The self-check child process the library starts itself: it finds it at ../libexec/fa4rt/ from its lib/.
install(TARGETS fa4rt_selfcheck RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/fa4rt COMPONENT runtime)

install(EXPORT fa4rtTargets NAMESPACE fa4rt:: DESTINATION ${FA4_CMAKE_DIR} COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fa4rtConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fa4rtConfig.cmake INSTALL_DESTINATION ${FA4_CMAKE_DIR})
# 0.x: a new minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fa4rtConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fa4rtConfig.cmake ${PROJECT_BINARY_DIR}/fa4rtConfigVersion.cmake
  DESTINATION ${FA4_CMAKE_DIR} COMPONENT development)

# pkg-config: prefix relative to the .pc file, so `cmake --install --prefix` anywhere gives a working file.
# cuda.h's directory is the build machine's (the public headers include cuda.h).
file(RELATIVE_PATH FA4_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
string(REGEX REPLACE "/$" "" FA4_PC_TO_PREFIX "${FA4_PC_TO_PREFIX}")
string(REPLACE ";" " -I" FA4_PC_CUDA_CFLAGS "-I${CUDAToolkit_INCLUDE_DIRS}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/fa4rt.pc.in ${PROJECT_BINARY_DIR}/fa4rt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fa4rt.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
