# titan_add_gtest(<name> SOURCES ... [LIBRARIES ...] [DEPENDS ...] [DEFINITIONS ...] [LABELS ...])
# A GoogleTest executable whose tests CTest lists one by one (labels: `unit` unless given).
# DEPENDS names what the tests run or load (plugins, tools), built first. Every test sees the
# source tree (TITAN_SOURCE_DIR, and includes from its root) and the build tree's plugin folder
# (TITAN_BUILD_PLUGIN_DIR).
include(GoogleTest)

function(titan_add_gtest name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LIBRARIES;DEPENDS;DEFINITIONS;LABELS")
  if(ARG_UNPARSED_ARGUMENTS OR NOT ARG_SOURCES)
    message(FATAL_ERROR "titan_add_gtest(${name}): expected SOURCES and known keywords, found "
                        "'${ARG_UNPARSED_ARGUMENTS}'")
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE ${ARG_LIBRARIES} GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE TITAN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TITAN_BUILD_PLUGIN_DIR="${TITAN_PLUGIN_OUTPUT_DIRECTORY}" ${ARG_DEFINITIONS})
  if(ARG_DEPENDS)
    add_dependencies(${name} ${ARG_DEPENDS})
  endif()
  # gtest_discover_tests passes its PROPERTIES on as a flat list, so a second label would be read
  # as a property name: the labels are set by a script CTest runs after the tests are listed.
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST TEST_LIST ${name}_TESTS)
  set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  file(WRITE ${labels_script}
       "foreach(test IN LISTS ${name}_TESTS)\n"
       "  set_tests_properties(\"\${test}\" PROPERTIES LABELS \"${ARG_LABELS}\")\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
endfunction()
