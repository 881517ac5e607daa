# rails: rerail-top (renders boards; runs the binary against boards in a temp directory).
rerail_gtest(test_rails_top
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/rails/test_rerail_top.cc
  LIBS rerail_top_view LABELS unit TIMEOUT 60)
target_compile_definitions(test_rails_top PRIVATE RERAIL_TOP_BIN="$<TARGET_FILE:rerail-top>")
add_dependencies(test_rails_top rerail-top)
