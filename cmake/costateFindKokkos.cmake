# Provides the interface target `costate_kokkos`, linking Kokkos.
#
# 1. find_package(Kokkos): a user's own Kokkos (3.x or 4.x, any backend).
# 2. Debian 12's Trilinos Kokkos ships a KokkosConfig.cmake whose include path
#    points at the non-existent /usr/lib/include; when the found target's
#    include directories do not exist, fall back to an imported target on the
#    real headers (/usr/include/trilinos) and libtrilinos_kokkoscore.
include_guard(GLOBAL)

set(_costate_kokkos_ok FALSE)
find_package(Kokkos QUIET)
if(Kokkos_FOUND AND TARGET Kokkos::kokkos)
  get_target_property(_costate_kk_inc Kokkos::kokkos INTERFACE_INCLUDE_DIRECTORIES)
  set(_costate_kokkos_ok TRUE)
  if(_costate_kk_inc)
    foreach(_d IN LISTS _costate_kk_inc)
      if(NOT _d MATCHES "^\\$<" AND NOT EXISTS "${_d}")
        set(_costate_kokkos_ok FALSE)
      endif()
    endforeach()
  endif()
endif()

if(_costate_kokkos_ok)
  if(NOT TARGET costate_kokkos)
    add_library(costate_kokkos INTERFACE)
    target_link_libraries(costate_kokkos INTERFACE Kokkos::kokkos)
  endif()
  set(COSTATE_KOKKOS_SOURCE "find_package(Kokkos ${Kokkos_VERSION})")
else()
  find_path(COSTATE_KOKKOS_INCLUDE_DIR KokkosCore_config.h
            PATHS /usr/include/trilinos PATH_SUFFIXES trilinos kokkos)
  find_library(COSTATE_KOKKOS_CORE_LIBRARY
               NAMES trilinos_kokkoscore kokkoscore)
  if(NOT COSTATE_KOKKOS_INCLUDE_DIR OR NOT COSTATE_KOKKOS_CORE_LIBRARY)
    message(FATAL_ERROR "costate: Kokkos not found. Install libtrilinos-kokkos-dev "
                        "(Debian) or point Kokkos_DIR at a Kokkos installation.")
  endif()
  find_package(Threads REQUIRED)
  if(NOT TARGET costate_kokkos)
    add_library(costate_kokkos INTERFACE)
    target_include_directories(costate_kokkos SYSTEM INTERFACE ${COSTATE_KOKKOS_INCLUDE_DIR})
    target_link_libraries(costate_kokkos INTERFACE ${COSTATE_KOKKOS_CORE_LIBRARY}
                          Threads::Threads ${CMAKE_DL_LIBS})
  endif()
  set(COSTATE_KOKKOS_SOURCE "Debian fallback: ${COSTATE_KOKKOS_CORE_LIBRARY}")
endif()
message(STATUS "costate: Kokkos from ${COSTATE_KOKKOS_SOURCE}")
