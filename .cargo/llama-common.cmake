# Included by llama.cpp's CMake build after its project() call: llama-cpp-2's
# build script passes every CMAKE_* variable of the environment on to CMake,
# and .cargo/config.toml sets CMAKE_PROJECT_INCLUDE to this file.
#
# llama-cpp-2's `common` feature links llama.cpp's `llama-common` library
# for three things we use: the JSON Schema → grammar converter, the lazy
# grammar sampler and the sampler shims that turn a C++ exception into an
# error instead of an abort. That library is 55 files (chat templates, a
# Jinja engine, 17 model-specific chat parsers, argument parsing, model
# downloads over cpp-httplib); built whole at -O3 it was over a third of
# llama.cpp's build, the critical path of a cold build (the build script:
# 385 s whole, 244 s trimmed, cold on two cores). Only the files below are reached
# from llama-cpp-2's shims (the transitive closure of their undefined
# symbols over the library's objects, read with `nm`), so only they are
# compiled, and cpp-httplib (reached from download.cpp only) is not built.
#
# A file llama.cpp renames or adds to that closure shows up as an error: a
# needed file missing from the library's sources leaves the library whole
# (a warning, a slower build), and a symbol newly needed from a file not
# listed fails the link of every binary that uses the local model. After
# editing this file: `cargo clean -p llama-cpp-sys-2` (the build script
# does not watch it).
include_guard(GLOBAL)

set(AGWIRE_LLAMA_COMMON_NEEDED
  common.cpp fit.cpp json-schema-to-grammar.cpp json-schema.cpp json.cpp log.cpp
  ngram-cache.cpp ngram-map.cpp ngram-mod.cpp reasoning-budget.cpp sampling.cpp
  speculative.cpp trie.cpp unicode.cpp)

function(agwire_trim_llama_common)
  if(NOT TARGET llama-common)
    return()
  endif()
  get_target_property(sources llama-common SOURCES)
  set(kept "")
  set(found "")
  foreach(source IN LISTS sources)
    get_filename_component(name "${source}" NAME)
    get_filename_component(dir "${source}" DIRECTORY)
    # Headers stay; a source stays when it is a needed file of common/
    # itself (not jinja/ or parsers/, which have names of their own).
    if(NOT name MATCHES "\\.(c|cc|cpp)$")
      list(APPEND kept "${source}")
    elseif(dir STREQUAL "" AND name IN_LIST AGWIRE_LLAMA_COMMON_NEEDED)
      list(APPEND kept "${source}")
      list(APPEND found "${name}")
    endif()
  endforeach()
  foreach(name IN LISTS AGWIRE_LLAMA_COMMON_NEEDED)
    if(NOT name IN_LIST found)
      message(WARNING "agwire: llama-common has no ${name}; building it whole (.cargo/llama-common.cmake)")
      return()
    endif()
  endforeach()
  set_property(TARGET llama-common PROPERTY SOURCES "${kept}")
  if(TARGET cpp-httplib)
    get_target_property(links llama-common LINK_LIBRARIES)
    list(REMOVE_ITEM links cpp-httplib)
    set_property(TARGET llama-common PROPERTY LINK_LIBRARIES "${links}")
    get_target_property(interface llama-common INTERFACE_LINK_LIBRARIES)
    if(interface)
      list(REMOVE_ITEM interface "$<LINK_ONLY:cpp-httplib>")
      set_property(TARGET llama-common PROPERTY INTERFACE_LINK_LIBRARIES "${interface}")
    endif()
    set_property(TARGET cpp-httplib PROPERTY EXCLUDE_FROM_ALL TRUE)
  endif()
  list(LENGTH found n)
  message(STATUS "agwire: llama-common trimmed to the ${n} files llama-cpp-2's shims reach")
endfunction()

# At the end of the top-level directory, when every target exists.
cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL agwire_trim_llama_common)
