# Resolves FLT_BUILD_VIZ (ON / OFF / AUTO) into FLT_VIZ_ENABLED: flt-lab needs GLFW 3, Dear ImGui
# (Debian's libimgui-dev ships the GLFW and OpenGL3 backends in libimgui.a), OpenGL and stb.
find_package(PkgConfig QUIET)
set(FLT_VIZ_ENABLED OFF)
if(NOT FLT_BUILD_VIZ STREQUAL "OFF" AND PkgConfig_FOUND)
  pkg_check_modules(FLT_GLFW QUIET IMPORTED_TARGET glfw3)
  pkg_check_modules(FLT_IMGUI QUIET IMPORTED_TARGET imgui)
  find_package(OpenGL QUIET)
  if(FLT_GLFW_FOUND AND FLT_IMGUI_FOUND AND OpenGL_FOUND)
    set(FLT_VIZ_ENABLED ON)
  endif()
endif()
if(FLT_BUILD_VIZ STREQUAL "ON" AND NOT FLT_VIZ_ENABLED)
  message(FATAL_ERROR "FLT_BUILD_VIZ=ON but GLFW 3, Dear ImGui or OpenGL was not found "
                      "(Debian: apt-get install libglfw3-dev libimgui-dev libstb-dev libgl-dev)")
endif()
