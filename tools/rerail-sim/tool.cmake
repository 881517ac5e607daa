# rerail-sim: flow-level ring-collective model over the planner (README in tuner_plugin/planner).
find_package(CLI11 CONFIG REQUIRED)
if(NOT TARGET rerail_planner)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tuner_plugin/planner ${CMAKE_BINARY_DIR}/tuner_plugin/planner)
endif()
add_executable(rerail-sim ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-sim PRIVATE rerail_planner CLI11::CLI11)
