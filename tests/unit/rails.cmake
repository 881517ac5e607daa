# rails: rail-health state machine, board, link monitor (no privileges, no network).
rerail_gtest(test_rails_unit
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/rails/test_rail_health.cc
          ${CMAKE_CURRENT_LIST_DIR}/rails/test_board.cc
          ${CMAKE_CURRENT_LIST_DIR}/rails/test_link_monitor.cc
  LIBS rerail_rails LABELS unit TIMEOUT 60)
