# Debian and RPM packages of titan: `cpack -G DEB` / `cpack -G RPM` in a build folder
# (tools/package does both). One package holds titan-run, the plugins, the SDK and the recipes.
set(CPACK_PACKAGE_NAME titan)
set(CPACK_PACKAGE_VENDOR "titan developers")
set(CPACK_PACKAGE_CONTACT "titan developers <titan@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Pre-training for Llama 3 models: a C++ core with parallelism, optimizer and device plugins")
set(CPACK_PACKAGE_DESCRIPTION
    "titan trains Llama-3-family language models from one CPU core to many GPUs. It ships\
 titan-run, its plugins, the plugin SDK (headers and the TitanSDK CMake package) and\
 TorchTitan-style recipes.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_RESOURCE_FILE_README ${PROJECT_SOURCE_DIR}/README.md)
set(CPACK_PACKAGE_FILE_NAME "${CPACK_PACKAGE_NAME}-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR}")

# Run-time dependencies come from the binaries themselves (dpkg-shlibdeps, rpm's autoreq);
# the SDK additionally wants the headers its public headers include.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "cmake, libabsl-dev, libboost-dev")
# dpkg-shlibdeps names only the virtual libopenblas0; the binaries' run path wants its OpenMP
# build, without which training runs slower (CMakeLists.txt).
if(OpenBLAS_DIR MATCHES "openblas-openmp")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp")
endif()
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_RPM_PACKAGE_LICENSE "Proprietary")
set(CPACK_RPM_PACKAGE_GROUP "Development/Tools")
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
# /usr/lib/cmake and /usr/lib/titan already belong to the system's filesystem package layout.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION /usr/lib/cmake /usr/share/titan /usr/lib/titan)

include(CPack)
