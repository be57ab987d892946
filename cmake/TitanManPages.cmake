# Man pages of the installed tools, made at build time by help2man from each tool's own --help
# (so a page says what its binary does) into <build>/share/man/man1/, and installed into
# <prefix>/share/man/man1/, where the Debian and RPM packages take them from.
# TITAN_MAN_PAGES: AUTO makes them where help2man is found, ON requires it, OFF skips them.
set(TITAN_MAN_PAGES AUTO CACHE STRING "Make and install man pages with help2man: AUTO, ON, OFF")
set_property(CACHE TITAN_MAN_PAGES PROPERTY STRINGS AUTO ON OFF)

if(NOT TITAN_MAN_PAGES STREQUAL "OFF")
  find_program(TITAN_HELP2MAN help2man)
  if(NOT TITAN_HELP2MAN AND TITAN_MAN_PAGES STREQUAL "ON")
    message(FATAL_ERROR "TITAN_MAN_PAGES=ON needs help2man (Debian: help2man), which is not found")
  elseif(NOT TITAN_HELP2MAN)
    message(STATUS "help2man not found: no man pages (Debian: apt-get install help2man)")
  endif()
endif()

# titan_add_man_page(TOOL PROGRAM DEPENDS DESCRIPTION): TOOL.1 from `PROGRAM --help`, remade
# when DEPENDS (the tool's target or file) changes.
function(titan_add_man_page tool program depends description)
  if(NOT TITAN_HELP2MAN OR TITAN_MAN_PAGES STREQUAL "OFF")
    return()
  endif()
  set(page ${PROJECT_BINARY_DIR}/share/man/man1/${tool}.1)
  # The tools run here as they are built: sanitizers must not turn a leak at exit into a failure.
  add_custom_command(OUTPUT ${page}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/share/man/man1
    COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0
            ${TITAN_HELP2MAN} --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
            --name=${description} --output=${page} ${program}
    DEPENDS ${depends}
    COMMENT "Man page ${tool}.1 from ${tool} --help"
    VERBATIM)
  add_custom_target(${tool}_man_page ALL DEPENDS ${page})
  install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endfunction()

titan_add_man_page(titan-run $<TARGET_FILE:titan-run> titan-run
                   "train a Llama 3 model as a TOML recipe describes")
titan_add_man_page(titan-checkpoint $<TARGET_FILE:titan-checkpoint> titan-checkpoint
                   "list and convert titan checkpoints (dcp, safetensors)")
titan_add_man_page(titan-generate $<TARGET_FILE:titan-generate> titan-generate
                   "sample text from a model titan-run saved")
titan_add_man_page(titan-lbdc $<TARGET_FILE:titan-lbdc> titan-lbdc
                   "evaluate controller-balancing (LBDC) policies on network topologies")
titan_add_man_page(titan-tokenize $<TARGET_FILE:titan-tokenize> titan-tokenize
                   "tokenize a corpus into pre-tokenized shards")
titan_add_man_page(titan-plot ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/titan-plot
                   ${PROJECT_SOURCE_DIR}/tools/plot/titan-plot
                   "chart titan runs' metrics (loss, throughput, MFU, memory, learning rate)")
