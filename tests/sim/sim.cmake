# The deterministic network simulator (issue #11): the real sans-I/O core (rr_core) over simulated
# rails with faults, NCCL-like drivers and oracles. rerail-simnet runs seeds (scripts/sim.sh);
# SimSwarm runs a fixed budget of seeds under ctest; test_simnet holds named scenarios.
add_library(rr_simnet STATIC ${CMAKE_CURRENT_LIST_DIR}/world_net.cc ${CMAKE_CURRENT_LIST_DIR}/world_drivers.cc
                             ${CMAKE_CURRENT_LIST_DIR}/world_oracles.cc
                             ${CMAKE_CURRENT_LIST_DIR}/scenario.cc)
target_include_directories(rr_simnet PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(rr_simnet PUBLIC rr_core)

add_executable(rerail-simnet ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_link_libraries(rerail-simnet PRIVATE rr_simnet)
set_target_properties(rerail-simnet PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/sim)

rerail_gtest(test_simnet SOURCES ${CMAKE_CURRENT_LIST_DIR}/sim_test.cc LIBS rr_simnet LABELS unit TIMEOUT 120)
# The swarm under ctest: a fixed, deterministic budget of seeds, sized for ~1-2 min on a loaded
# 2-core machine (~30 s of CPU, ~100 s at load 11); `scripts/sim.sh 20000` is the issue's CI figure.
# A violation prints the seed and its repro line.
if(RERAIL_SANITIZE)  # 5-15x slower per seed: the same wall-clock budget
  set(RERAIL_SIM_SEEDS 500 CACHE STRING "Seeds the SimSwarm ctest runs")
else()
  set(RERAIL_SIM_SEEDS 4000 CACHE STRING "Seeds the SimSwarm ctest runs")
endif()
add_test(NAME SimSwarm COMMAND rerail-simnet --seeds ${RERAIL_SIM_SEEDS} --from 1)
set_tests_properties(SimSwarm PROPERTIES LABELS unit TIMEOUT 600)
