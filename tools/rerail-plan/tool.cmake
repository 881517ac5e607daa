# The planner library lives in tuner_plugin/planner; built here so tools and tests can link it
# whether or not tuner_plugin/CMakeLists.txt adds it.
if(NOT TARGET rerail_planner)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tuner_plugin/planner ${CMAKE_BINARY_DIR}/tuner_plugin/planner)
endif()

find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json REQUIRED)
add_library(rerail_plan_lib STATIC ${CMAKE_CURRENT_LIST_DIR}/graph_xml.cc ${CMAKE_CURRENT_LIST_DIR}/board_input.cc)
target_include_directories(rerail_plan_lib PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_plan_lib PUBLIC rerail_planner rerail_board)
add_executable(rerail-plan ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-plan PRIVATE rerail_plan_lib CLI11::CLI11 nlohmann_json::nlohmann_json)
