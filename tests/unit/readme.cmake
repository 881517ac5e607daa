# The README's RERAIL_* table must be the generated one (params_table.h is the single source).
add_test(NAME ReadmeParamsTableInSync
         COMMAND bash ${CMAKE_SOURCE_DIR}/scripts/readme-params.sh $<TARGET_FILE:rerail-info>)
set_tests_properties(ReadmeParamsTableInSync PROPERTIES LABELS unit TIMEOUT 30)
