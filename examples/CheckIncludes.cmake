# Fails when a file in DIR includes anything but a public TilePilot header (<tilepilot/...>), a
# standard C++ header (<vector>: no directory, no extension) or "lesson.h", the lessons' shared
# scaffolding next to them (itself checked here). Run: cmake -DDIR=examples -P this
file(GLOB_RECURSE files ${DIR}/*.cpp ${DIR}/*.h ${DIR}/*.hpp ${DIR}/*.cc)
set(bad "")
foreach(f ${files})
  file(STRINGS ${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<tilepilot/[A-Za-z0-9_]+\\.h>")
    elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<[a-z_0-9]+>")
    elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"lesson\\.h\"[ \t]*(//.*)?$")
    else()
      file(RELATIVE_PATH rel ${DIR} ${f})
      string(APPEND bad "\n  ${rel}: ${line}")
    endif()
  endforeach()
endforeach()
list(LENGTH files n)
if(bad)
  message(FATAL_ERROR "examples must include only public headers (<tilepilot/...>), standard "
                      "ones and \"lesson.h\"; move what a lesson needs into include/tilepilot/, "
                      "lesson.h or the lesson:${bad}")
endif()
message(STATUS "${n} files in ${DIR} include public headers (and lesson.h) only")
