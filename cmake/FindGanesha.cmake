# FindGanesha: nfs-ganesha for building an FSAL module out of tree.
#
# Ganesha installs no development files: its headers come from the source
# tree of Debian's source package (fetched and configured by ci/setup.sh,
# never committed), its library from the installed binary package.
#
#   Ganesha_SOURCE_DIR   the tree's src/ directory
#   Ganesha_BUILD_DIR    a configured build tree holding include/config.h
#   Ganesha_LIBRARY_DIR  where libganesha_nfsd.so.<version> lives
#   Ganesha_VERSION      the major.minor to link against (4.3)
#
# Defines the imported target Ganesha::nfsd: the headers (as SYSTEM, with
# ntirpc's), the definitions they need, and the library.
include(FindPackageHandleStandardArgs)

set(Ganesha_VERSION "4.3" CACHE STRING "nfs-ganesha major.minor")
set(Ganesha_SOURCE_DIR "${PROJECT_SOURCE_DIR}/.cache/nfs-ganesha-${Ganesha_VERSION}/src"
    CACHE PATH "nfs-ganesha source tree (src/)")
set(Ganesha_BUILD_DIR "${PROJECT_SOURCE_DIR}/.cache/ganesha-build"
    CACHE PATH "configured Ganesha build tree holding include/config.h")
set(Ganesha_LIBRARY_DIR "/usr/lib/ganesha" CACHE PATH "where libganesha_nfsd.so.${Ganesha_VERSION} lives")

find_path(Ganesha_CONFIG_DIR config.h PATHS "${Ganesha_BUILD_DIR}/include" NO_DEFAULT_PATH)
find_path(Ganesha_INCLUDE_DIR fsal_api.h PATHS "${Ganesha_SOURCE_DIR}/include" NO_DEFAULT_PATH)
find_library(Ganesha_LIBRARY NAMES "libganesha_nfsd.so.${Ganesha_VERSION}" PATHS "${Ganesha_LIBRARY_DIR}"
             NO_DEFAULT_PATH)
find_package(PkgConfig QUIET)
find_path(Ganesha_NTIRPC_DIR rpc/xdr.h PATH_SUFFIXES ntirpc)

find_package_handle_standard_args(Ganesha
  REQUIRED_VARS Ganesha_CONFIG_DIR Ganesha_INCLUDE_DIR Ganesha_LIBRARY Ganesha_NTIRPC_DIR
  VERSION_VAR Ganesha_VERSION
  REASON_FAILURE_MESSAGE "run ci/setup.sh: it fetches Ganesha's source tree and installs nfs-ganesha and libntirpc-dev")

if(Ganesha_FOUND AND NOT TARGET Ganesha::nfsd)
  add_library(Ganesha::nfsd SHARED IMPORTED)
  set_target_properties(Ganesha::nfsd PROPERTIES
    IMPORTED_LOCATION "${Ganesha_LIBRARY}"
    IMPORTED_NO_SONAME FALSE)
  target_include_directories(Ganesha::nfsd SYSTEM INTERFACE
    "${Ganesha_CONFIG_DIR}"
    "${Ganesha_INCLUDE_DIR}"
    "${Ganesha_INCLUDE_DIR}/os/linux"
    "${Ganesha_SOURCE_DIR}"              # FSAL/FSAL_VFS/vfs_methods.h
    "${Ganesha_SOURCE_DIR}/FSAL/FSAL_VFS"
    "${Ganesha_NTIRPC_DIR}")
  target_compile_definitions(Ganesha::nfsd INTERFACE _GNU_SOURCE=1 _LARGEFILE64_SOURCE _FILE_OFFSET_BITS=64)
endif()
mark_as_advanced(Ganesha_CONFIG_DIR Ganesha_INCLUDE_DIR Ganesha_LIBRARY Ganesha_NTIRPC_DIR)
