# How a mlaverify library becomes consumable: mlaverify::<name> for add_subdirectory(mlaverify)
# users, and the same name for find_package(mlaverify) users after `cmake --install`.
#
#   mlav_export_library(<target>
#                       [DEPENDENCIES "<find_dependency args>" ...]
#                       [PKG_CONFIG "<prefix> <module>..." ...])
#
# Call it once per library, after add_library and target_link_libraries, in the layer folder
# whose headers the library owns (model/, cpu/, scenarios/, ...). It:
#   - names the target mlaverify::<name> (<target> less its mlaverify_ prefix): an ALIAS in the
#     build, the EXPORT_NAME in the installed package, so both ways of consuming it spell it alike;
#   - adds the include root PUBLIC: the mlaverify source root in the build (headers are included
#     as "model/batch.h", "cpu/cpu_backend.h", ...), include/mlaverify-layers when installed;
#   - installs the library into the mlaverifyTargets export set and the folder's *.h under
#     include/mlaverify-layers/<folder>/ (once per folder, however many libraries it holds);
#   - records what the generated mlaverifyConfig.cmake must find before it loads the targets:
#     DEPENDENCIES entries become find_dependency(<entry>) lines, verbatim ("Eigen3 3.4 NO_MODULE",
#     "nlohmann_json 3"); PKG_CONFIG entries "<prefix> <module>..." become
#     pkg_check_modules(<prefix> QUIET IMPORTED_TARGET <module>...), the one imported target
#     PkgConfig::<prefix> that pkg-config users link. Name every package the library links, PUBLIC
#     or PRIVATE (a static library's private links travel with it). Packages the top level already
#     finds for the core (Threads, Eigen3, nlohmann_json, rapidcheck) can be named again: entries
#     are deduplicated.
#
# A new layer (say dump/ or viz/) adds its folder to MLAV_LAYERS in the top-level CMakeLists.txt
# (dump and viz are listed already) and one line after its target:
#
#   # dump/CMakeLists.txt
#   add_library(mlaverify_dump STATIC dump.cpp safetensors.cpp)
#   target_link_libraries(mlaverify_dump PUBLIC mlaverify_include mlaverify_model
#                                        PRIVATE nlohmann_json::nlohmann_json)
#   mlav_export_library(mlaverify_dump DEPENDENCIES "nlohmann_json 3")
#
#   # viz/CMakeLists.txt (GLOBAL: cli/ links mlaverify_viz and must see PkgConfig::Cairo too)
#   find_package(PkgConfig REQUIRED)
#   pkg_check_modules(MLAV_CAIRO REQUIRED IMPORTED_TARGET GLOBAL cairo)
#   add_library(mlaverify_viz STATIC show.cpp)
#   target_link_libraries(mlaverify_viz PUBLIC mlaverify_include PRIVATE PkgConfig::MLAV_CAIRO)
#   mlav_export_library(mlaverify_viz PKG_CONFIG "MLAV_CAIRO cairo")
#
# Do not call target_include_directories(... ${CMAKE_SOURCE_DIR}) or ${PROJECT_SOURCE_DIR} in a
# layer: CMAKE_SOURCE_DIR is the consumer's root under add_subdirectory, and a raw source path
# cannot be exported. Test-only libraries (mlaverify_cpu_faults) are not exported.
include_guard(GLOBAL)
include(GNUInstallDirs)

set(MLAV_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/mlaverify)
# The include root of the layer headers once installed; it holds only the layer folders (model/,
# cpu/, props/, scenarios/, cuda/, ...), never a loose header, so it cannot capture a consumer's
# #include <error.h> or "config.h" (README: "Using mlaverify from your CMake project").
set(MLAV_INSTALL_LAYER_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/mlaverify-layers)

function(mlav_export_library target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "DEPENDENCIES;PKG_CONFIG")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mlav_export_library(${target}): unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "mlav_export_library(${target}): no such target (call it after add_library)")
  endif()
  string(REGEX REPLACE "^mlaverify_" "" name ${target})
  add_library(mlaverify::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${mlaverify_SOURCE_DIR}>
    $<INSTALL_INTERFACE:${MLAV_INSTALL_LAYER_INCLUDEDIR}>)
  set_property(GLOBAL APPEND PROPERTY MLAV_EXPORTED_NAMES ${name})

  foreach(dep IN LISTS ARG_DEPENDENCIES)
    set_property(GLOBAL APPEND PROPERTY MLAV_CONFIG_DEPENDENCIES "find_dependency(${dep})")
  endforeach()
  foreach(pc IN LISTS ARG_PKG_CONFIG)
    string(REPLACE " " ";" pc_words "${pc}")
    list(POP_FRONT pc_words prefix)
    if(NOT pc_words)
      message(FATAL_ERROR "mlav_export_library(${target}): PKG_CONFIG \"${pc}\" names no module "
                          "(write \"<prefix> <module>...\", e.g. \"Cairo cairo\")")
    endif()
    list(JOIN pc_words " " modules)
    set_property(GLOBAL APPEND PROPERTY MLAV_CONFIG_DEPENDENCIES
      "find_dependency(PkgConfig)"
      "pkg_check_modules(${prefix} QUIET IMPORTED_TARGET ${modules})
if(NOT ${prefix}_FOUND)
  set(mlaverify_FOUND FALSE)
  set(mlaverify_NOT_FOUND_MESSAGE \"mlaverify::${name} needs pkg-config module(s) ${modules}\")
  return()
endif()")
  endforeach()

  if(NOT MLAV_INSTALL)
    return()
  endif()
  install(TARGETS ${target} EXPORT mlaverifyTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  get_property(done DIRECTORY PROPERTY MLAV_HEADERS_INSTALLED)
  if(NOT done)
    set_property(DIRECTORY PROPERTY MLAV_HEADERS_INSTALLED TRUE)
    get_filename_component(folder ${CMAKE_CURRENT_SOURCE_DIR} NAME)
    file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
    install(FILES ${headers} DESTINATION ${MLAV_INSTALL_LAYER_INCLUDEDIR}/${folder})
  endif()
endfunction()

# Called once at the end of the top-level CMakeLists.txt: the export set, mlaverifyConfig.cmake
# (the recorded dependencies, then the targets) and its version file.
function(mlav_write_package)
  if(NOT MLAV_INSTALL)
    return()
  endif()
  include(CMakePackageConfigHelpers)
  get_property(deps GLOBAL PROPERTY MLAV_CONFIG_DEPENDENCIES)
  list(REMOVE_DUPLICATES deps)
  list(JOIN deps "\n" MLAV_CONFIG_DEPENDENCIES)
  get_property(MLAV_EXPORTED_NAMES GLOBAL PROPERTY MLAV_EXPORTED_NAMES)
  install(EXPORT mlaverifyTargets NAMESPACE mlaverify:: DESTINATION ${MLAV_INSTALL_CMAKEDIR})
  configure_package_config_file(
    ${mlaverify_SOURCE_DIR}/cmake/mlaverifyConfig.cmake.in
    ${mlaverify_BINARY_DIR}/mlaverifyConfig.cmake
    INSTALL_DESTINATION ${MLAV_INSTALL_CMAKEDIR}
    PATH_VARS CMAKE_INSTALL_DATADIR)
  write_basic_package_version_file(${mlaverify_BINARY_DIR}/mlaverifyConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${mlaverify_BINARY_DIR}/mlaverifyConfig.cmake
                ${mlaverify_BINARY_DIR}/mlaverifyConfigVersion.cmake
          DESTINATION ${MLAV_INSTALL_CMAKEDIR})
endfunction()
