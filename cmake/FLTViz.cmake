# Resolves FLT_BUILD_VIZ (ON / OFF / AUTO) into FLT_VIZ_ENABLED: flt-lab needs GLFW 3, Dear ImGui
# (Debian's libimgui-dev ships the GLFW and OpenGL3 backends in libimgui.a), OpenGL, stb and CLI11
# (its command line).
find_package(PkgConfig QUIET)
set(FLT_VIZ_ENABLED OFF)
if(NOT FLT_BUILD_VIZ STREQUAL "OFF" AND PkgConfig_FOUND)
  pkg_check_modules(FLT_GLFW QUIET IMPORTED_TARGET glfw3)
  pkg_check_modules(FLT_IMGUI QUIET IMPORTED_TARGET imgui)
  find_package(OpenGL QUIET)
  find_package(CLI11 2.1 CONFIG QUIET)
  if(FLT_GLFW_FOUND AND FLT_IMGUI_FOUND AND OpenGL_FOUND AND CLI11_FOUND)
    set(FLT_VIZ_ENABLED ON)
  endif()
endif()
if(FLT_BUILD_VIZ STREQUAL "ON" AND NOT FLT_VIZ_ENABLED)
  message(FATAL_ERROR "FLT_BUILD_VIZ=ON but GLFW 3, Dear ImGui, OpenGL or CLI11 was not found "
                      "(Debian: apt-get install libglfw3-dev libimgui-dev libstb-dev libgl-dev "
                      "libcli11-dev)")
endif()
