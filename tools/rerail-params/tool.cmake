add_executable(rerail-params ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-params PRIVATE rerail_common)
