# rerail-top: live view of the rail-health boards (net_plugin/rails).
add_library(rerail_top_view STATIC ${CMAKE_CURRENT_LIST_DIR}/top_view.cc)
target_include_directories(rerail_top_view PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rerail_top_view PUBLIC rerail_board)

add_executable(rerail-top ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-top PRIVATE rerail_top_view)
