/* Two of libibverbs' entry points and nothing else, built twice (tests/unit/ib.cmake): unversioned
 * (glibc's dlvsym accepts an unversioned definition for any version, so the loader then stops at the
 * first entry point this lacks) and under a foreign version node (dlvsym(..., "IBVERBS_1.1") finds
 * nothing). rerail's loader must reject both (tests/unit/ib/test_verbs_loader.cc). Never called. */
#include <stddef.h>

__attribute__((visibility("default"))) void** ibv_get_device_list(int* n) {
  if (n) *n = 0;
  return NULL;
}
__attribute__((visibility("default"))) void ibv_free_device_list(void** list) { (void)list; }
