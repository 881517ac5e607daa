# The planner library lives in tuner_plugin/planner; built here so tools and tests can link it
# whether or not tuner_plugin/CMakeLists.txt adds it.
if(NOT TARGET rerail_planner)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tuner_plugin/planner ${CMAKE_BINARY_DIR}/tuner_plugin/planner)
endif()
