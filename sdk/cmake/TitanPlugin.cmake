# titan_add_plugin(<kind> <name> SOURCES <files...> [LIBRARIES <targets...>] [NO_INSTALL])
#
# Builds the plugin library titan_<kind>_<name>.so against the SDK. In-tree plugins and
# third-party plugins use this same function. Output goes to TITAN_PLUGIN_OUTPUT_DIRECTORY
# when set (the titan build tree), else to the caller's binary directory; the library is
# installed to TITAN_PLUGIN_INSTALL_DIR (default lib/titan/plugins) unless NO_INSTALL. Where the
# caller has a target `titan_plugins` (the titan build tree does), every installed plugin joins it.
function(titan_add_plugin kind name)
  cmake_parse_arguments(PLUGIN "NO_INSTALL" "" "SOURCES;LIBRARIES" ${ARGN})
  set(TITAN_PLUGIN_KINDS parallel optimizer float8 checkpoint comm device balance)
  if(NOT kind IN_LIST TITAN_PLUGIN_KINDS)
    message(FATAL_ERROR "titan_add_plugin: unknown kind '${kind}'; one of: ${TITAN_PLUGIN_KINDS}")
  endif()
  if(NOT name MATCHES "^[a-z0-9][a-z0-9-]*$")
    message(FATAL_ERROR "titan_add_plugin: name '${name}' must be lowercase letters, digits, '-'")
  endif()
  if(NOT PLUGIN_SOURCES)
    message(FATAL_ERROR "titan_add_plugin(${kind} ${name}): SOURCES is required")
  endif()
  set(target titan_${kind}_${name})
  add_library(${target} MODULE ${PLUGIN_SOURCES})
  target_link_libraries(${target} PRIVATE TitanSDK::sdk ${PLUGIN_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${target}
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(TITAN_PLUGIN_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${TITAN_PLUGIN_OUTPUT_DIRECTORY})
  endif()
  if(NOT PLUGIN_NO_INSTALL)
    if(NOT TITAN_PLUGIN_INSTALL_DIR)
      set(TITAN_PLUGIN_INSTALL_DIR lib/titan/plugins)
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${TITAN_PLUGIN_INSTALL_DIR})
    if(TARGET titan_plugins)
      add_dependencies(titan_plugins ${target})
    endif()
  endif()
endfunction()
