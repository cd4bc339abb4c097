# Run by ctest: every installed header is reachable from the umbrella <flt/flt.h> through
# #include "flt/..." lines, or is on the written exclusion list below. A new public header that no
# umbrella includes fails here, so <flt/flt.h> keeps including everything installed.
cmake_minimum_required(VERSION 3.18)  # IN_LIST
# -DFLT_SOURCE_DIR=... -DFLT_INCLUDE_FOLDERS=core;kernels;... (the installed include roots)

# Installed headers no umbrella includes on purpose (none at present).
set(excluded "")

set(installed "")
foreach(folder IN LISTS FLT_INCLUDE_FOLDERS)
  set(root "${FLT_SOURCE_DIR}/${folder}/include")
  file(GLOB_RECURSE headers RELATIVE "${root}" "${root}/flt/*.h" "${root}/flt/*.h.in")
  foreach(header IN LISTS headers)
    string(REGEX REPLACE "\\.in$" "" name "${header}")  # version.h.in installs as version.h
    list(APPEND installed "${name}")
    set(path_${name} "${root}/${header}")
  endforeach()
endforeach()

set(reached "")
set(queue flt/flt.h)
while(queue)
  list(POP_FRONT queue header)
  if(header IN_LIST reached)
    continue()
  endif()
  if(NOT DEFINED path_${header})
    message(FATAL_ERROR "${header} is included from an umbrella but is not an installed header")
  endif()
  list(APPEND reached "${header}")
  file(STRINGS "${path_${header}}" lines REGEX "^#include \"flt/")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    list(APPEND queue "${included}")
  endforeach()
endwhile()

set(missing "")
foreach(header IN LISTS installed)
  if(NOT header IN_LIST reached AND NOT header IN_LIST excluded)
    list(APPEND missing "${header}")
  endif()
endforeach()
list(LENGTH installed count)
list(LENGTH reached count_reached)
if(missing)
  message(FATAL_ERROR "installed headers no umbrella reaches (include them from their layer's "
                      "umbrella, or list them as excluded with a reason): ${missing}")
endif()
message(STATUS "umbrella: ${count_reached} of ${count} installed headers reached from flt/flt.h; "
               "excluded: ${excluded}")
