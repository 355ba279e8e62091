# FindGanesha: nfs-ganesha for building an FSAL module out of tree.
#
# Ganesha installs no development files: its headers come from the source
# tree of Debian's source package (fetched and configured by ci/setup.sh,
# never committed), its library from the installed binary package.
#
#   Ganesha_SOURCE_DIR   the tree's src/ directory
#   Ganesha_BUILD_DIR    a configured build tree holding include/config.h
#   Ganesha_LIBRARY_DIR  where libganesha_nfsd.so.<version> lives
#   Ganesha_VERSION      the major.minor to link against: a release of
#                        ci/releases.tsv, by default the host's (the one
#                        with no root); the others are configured and built
#                        inside their Debian root (ci/setup.sh --ganesha X,
#                        ci/build.sh --ganesha X)
#
# Every release puts libganesha_nfsd.so.<version> in /usr/lib/ganesha and the
# FSAL modules in /usr/lib/<multiarch>/ganesha (those of its root).
#
# Defines the imported target Ganesha::nfsd: the headers (as SYSTEM, with
# ntirpc's), the definitions they need, and the library.
include(FindPackageHandleStandardArgs)

# The releases (ci/releases.tsv, the one table): each one's ntirpc major,
# and which runs on the host (no root).
file(STRINGS "${PROJECT_SOURCE_DIR}/ci/releases.tsv" _release_rows REGEX "^[0-9]")
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/ci/releases.tsv")
set(_releases "")
foreach(_row IN LISTS _release_rows)
  string(REPLACE "\t" ";" _cols "${_row}")
  list(GET _cols 0 _rel)
  list(GET _cols 3 _ntirpc_major_of_${_rel})
  list(GET _cols 6 _root)
  if(_root STREQUAL "-")
    set(_host_release ${_rel})
  endif()
  list(APPEND _releases ${_rel})
endforeach()

set(Ganesha_VERSION "${_host_release}" CACHE STRING "nfs-ganesha major.minor")
set(Ganesha_SOURCE_DIR "${PROJECT_SOURCE_DIR}/.cache/nfs-ganesha-${Ganesha_VERSION}/src"
    CACHE PATH "nfs-ganesha source tree (src/)")
if(Ganesha_VERSION STREQUAL _host_release)
  set(_ganesha_build_dir "${PROJECT_SOURCE_DIR}/.cache/ganesha-build")
else()
  set(_ganesha_build_dir "${PROJECT_SOURCE_DIR}/.cache/ganesha-build-${Ganesha_VERSION}")
endif()
set(Ganesha_BUILD_DIR "${_ganesha_build_dir}"
    CACHE PATH "configured Ganesha build tree holding include/config.h")
set(Ganesha_LIBRARY_DIR "/usr/lib/ganesha" CACHE PATH "where libganesha_nfsd.so.${Ganesha_VERSION} lives")

find_path(Ganesha_CONFIG_DIR config.h PATHS "${Ganesha_BUILD_DIR}/include" NO_DEFAULT_PATH)
find_path(Ganesha_INCLUDE_DIR fsal_api.h PATHS "${Ganesha_SOURCE_DIR}/include" NO_DEFAULT_PATH)
find_library(Ganesha_LIBRARY NAMES "libganesha_nfsd.so.${Ganesha_VERSION}" PATHS "${Ganesha_LIBRARY_DIR}"
             NO_DEFAULT_PATH)
find_package(PkgConfig QUIET)
find_path(Ganesha_NTIRPC_DIR rpc/xdr.h PATH_SUFFIXES ntirpc)

# Each Ganesha release builds against the ntirpc its Debian suite ships
# (the table's ntirpc column): 6.5's headers with Debian 12's ntirpc 4 (a
# 6.5 build on the host, outside its root) would not fit.
unset(Ganesha_NTIRPC_FITS)
if(NOT DEFINED _ntirpc_major_of_${Ganesha_VERSION})
  message(STATUS "Ganesha ${Ganesha_VERSION}: DCACHE builds for ${_releases} (ci/releases.tsv)")
elseif(Ganesha_NTIRPC_DIR AND EXISTS "${Ganesha_NTIRPC_DIR}/version.h")
  file(STRINGS "${Ganesha_NTIRPC_DIR}/version.h" _ntirpc_major REGEX "^#define NTIRPC_VERSION_MAJOR ")
  string(REGEX REPLACE ".* ([0-9]+).*" "\\1" _ntirpc_major "${_ntirpc_major}")
  if(_ntirpc_major STREQUAL _ntirpc_major_of_${Ganesha_VERSION})
    set(Ganesha_NTIRPC_FITS TRUE)
  else()
    message(STATUS "Ganesha ${Ganesha_VERSION} needs ntirpc ${_ntirpc_major_of_${Ganesha_VERSION}}.x, ${Ganesha_NTIRPC_DIR} is ${_ntirpc_major}.x")
  endif()
endif()

if(Ganesha_VERSION STREQUAL _host_release)
  set(_ganesha_setup "ci/setup.sh")
else()
  set(_ganesha_setup "ci/setup.sh --ganesha ${Ganesha_VERSION}, and build inside its root (ci/build.sh --ganesha ${Ganesha_VERSION})")
endif()
find_package_handle_standard_args(Ganesha
  REQUIRED_VARS Ganesha_CONFIG_DIR Ganesha_INCLUDE_DIR Ganesha_LIBRARY Ganesha_NTIRPC_DIR Ganesha_NTIRPC_FITS
  VERSION_VAR Ganesha_VERSION
  REASON_FAILURE_MESSAGE "run ${_ganesha_setup}: it fetches Ganesha's source tree and installs nfs-ganesha and libntirpc-dev")

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
