/* Helper for test_c_api: a fresh process (parameters are read once per process) that loads
 * librerail-bootstrap.so like an application would and runs one case named by argv[2].
 * Written in C so the public header is also checked as C. Prints one result line. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rerail/bootstrap.h"

#define LOAD(name) name##_t fn_##name = (name##_t)dlsym(so, #name)
typedef rerailResult_t (*rerailJobFromEnv_t)(rerailJob**);
typedef rerailResult_t (*rerailJobCreate_t)(const char*, int, int, int, const char*, rerailJob**);
typedef void (*rerailJobDestroy_t)(rerailJob*);
typedef int (*rerailJobNumRanks_t)(const rerailJob*);
typedef int (*rerailRootlessRequested_t)(void);
typedef rerailResult_t (*rerailCommIdString_t)(const rerailJob*, uint64_t, char*, size_t);
typedef rerailResult_t (*rerailCommInitStoreless_t)(const rerailJob*, uint64_t, int, int, void*);
typedef rerailResult_t (*rerailCommRecover_t)(const rerailJob*, uint64_t*, int, void*, const int*, int, int, int, void*);
typedef const char* (*rerailGetLastError_t)(void);
typedef rerailResult_t (*rerailCommInitScalable_t)(const rerailJob*, uint64_t, int, int, int, void*);

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  void* so = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    printf("dlopen: %s\n", dlerror());
    return 1;
  }
  LOAD(rerailJobFromEnv); LOAD(rerailJobCreate); LOAD(rerailJobDestroy); LOAD(rerailJobNumRanks);
  LOAD(rerailRootlessRequested); LOAD(rerailCommIdString); LOAD(rerailCommInitStoreless);
  LOAD(rerailCommRecover); LOAD(rerailGetLastError); LOAD(rerailCommInitScalable);
  (void)fn_rerailJobCreate;
  rerailJob* job = NULL;
  char cid[64] = "";
  if (!strcmp(argv[2], "env")) {
    if (fn_rerailJobFromEnv(&job) != RERAIL_SUCCESS) {
      printf("error: %s\n", fn_rerailGetLastError());
      return 0;
    }
    fn_rerailCommIdString(job, 1, cid, sizeof(cid));
    printf("%d %s rootless=%d\n", fn_rerailJobNumRanks(job), cid, fn_rerailRootlessRequested());
  } else if (!strcmp(argv[2], "init")) {
    /* Store-less init of a 1-rank communicator on this host, then recovery by re-creation. */
    if (fn_rerailJobFromEnv(&job) != RERAIL_SUCCESS) {
      printf("error: %s\n", fn_rerailGetLastError());
      return 0;
    }
    void* comm = NULL;
    int rc = fn_rerailCommInitStoreless(job, 0, 0, RERAIL_ID_JOB_MAGIC, &comm);
    const char* env = getenv("NCCL_COMM_ID");
    printf("rc=%d env=%s err=%s", rc, env ? env : "", fn_rerailGetLastError());
    if (rc == RERAIL_SUCCESS) {
      uint64_t group = 0;
      void* again = NULL;
      rc = fn_rerailCommRecover(job, &group, 0, comm, NULL, 0, RERAIL_RECOVER_RECREATE, 0, &again);
      printf(" recover=%d group=%llu", rc, (unsigned long long)group);
    }
    printf("\n");
  } else if (!strcmp(argv[2], "scalable")) {
    /* Multi-root init of a 1-rank communicator: the id travels through the rootless exchange. */
    if (fn_rerailJobFromEnv(&job) != RERAIL_SUCCESS) {
      printf("error: %s\n", fn_rerailGetLastError());
      return 0;
    }
    void* comm = NULL;
    int rc = fn_rerailCommInitScalable(job, 0, 0, 1, 5000, &comm);
    printf("rc=%d err=%s\n", rc, fn_rerailGetLastError());
  } else {
    return 2;
  }
  fn_rerailJobDestroy(job);
  return 0;
}
