/* rerail ABI check, written in C on purpose: a C program must be able to load every rerail library
 * the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL: every undefined symbol resolves at load time) and
 * find the expected data symbols.
 *
 *   abi_dlopen load PATH SYM...        dlopen PATH, dlsym every SYM; for ncclNetPlugin_vN also check the
 *                                      function table and properties layout at run time (below)
 *   abi_dlopen name-rule KIND NAME EXPECTED_PATH
 *                                      apply NCCL's library-name rule for NCCL_<KIND>_PLUGIN=NAME
 *                                      (reference §1.1) through the normal loader search and check that
 *                                      it resolves to EXPECTED_PATH
 *
 * Profiler and tuner tables: every mandatory slot (reference §2.5) non-NULL.
 * Run-time layout check of a net table: mandatory slots (reference §2.2) non-NULL at their offsets;
 * init + devices succeed; getProperties(0) into a sentinel-filled buffer writes nothing past the
 * version's struct size (v10 104 B, v11 112 B, v12 128 B, §2.5) and sane values at the reference
 * offsets; then one message through the table to itself over loopback. Exit 0 = pass, 1 = a check failed
 * (each failure printed), 2 = usage. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_failures = 0;

static void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  ++g_failures;
}

static void quiet_logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags, (void)file, (void)line;
  if (level != 2) return; /* WARN lines are shown: a healthy init should not print any */
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "plugin WARN: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

typedef int (*init_v10_fn)(void* log, void* prof);
typedef int (*init_v11_fn)(void** ctx, uint64_t comm_id, int* config, void* log, void* prof);
typedef int (*devices_fn)(int* ndev);
typedef int (*props_fn)(int dev, void* props);
typedef int (*finalize_fn)(void* ctx);
typedef int (*listen_v10_fn)(int dev, void* handle, void** lc);
typedef int (*listen_v11_fn)(void* ctx, int dev, void* handle, void** lc);
typedef int (*connect_v10_fn)(int dev, int* config, void* handle, void** sc, void** dev_comm);
typedef int (*connect_v11_fn)(void* ctx, int dev, void* handle, void** sc, void** dev_comm);
typedef int (*accept_fn)(void* lc, void** rc, void** dev_comm);
typedef int (*regmr_fn)(void* comm, void* data, size_t size, int type, void** mh);
typedef int (*deregmr_fn)(void* comm, void* mh);
typedef int (*isend_fn)(void* sc, void* data, size_t size, int tag, void* mh, void* ph, void** req);
typedef int (*irecv_fn)(void* rc, int n, void** data, size_t* sizes, int* tags, void** mhs, void** phs,
                        void** req);
typedef int (*test_fn)(void* req, int* done, int* sizes);
typedef int (*close_fn)(void* comm);

#define SENTINEL 0xAB
#define PROBE_BYTES 256

/* Reference §2.5 offsets per properties version. */
struct props_layout {
  int size, vprops, max_p2p, max_multi, rail_id;
};

static const void* slot(const void* table, int i) {
  return ((const void* const*)table)[i];
}

static int read_i32(const unsigned char* p, int off) {
  int32_t v;
  memcpy(&v, p + off, 4);
  return v;
}

static void check_props(const char* sym, const unsigned char* p, const struct props_layout* L) {
  for (int i = L->size; i < PROBE_BYTES; ++i) {
    if (p[i] != SENTINEL) {
      fail("%s getProperties wrote byte %d, past the %d-byte struct", sym, i, L->size);
      break;
    }
  }
  const char* name;
  memcpy(&name, p + 0, sizeof(name));
  if (name == NULL || name[0] == '\0') fail("%s props.name@0 is empty", sym);
  int ptr_support = read_i32(p, 24);
  if (!(ptr_support & 0x1)) fail("%s props.ptrSupport@24 = %#x lacks NCCL_PTR_HOST", sym, ptr_support);
  if (read_i32(p, 48) < 1) fail("%s props.maxComms@48 = %d", sym, read_i32(p, 48));
  if (read_i32(p, 52) < 1) fail("%s props.maxRecvs@52 = %d", sym, read_i32(p, 52));
  if (read_i32(p, 56) != 0) fail("%s props.netDeviceType@56 = %d, want 0 (host)", sym, read_i32(p, 56));
  if (read_i32(p, 60) != 0) fail("%s props.netDeviceVersion@60 = %d, want 0", sym, read_i32(p, 60));
  if (read_i32(p, L->vprops) != 1 || read_i32(p, L->vprops + 4) != 0)
    fail("%s props.vProps@%d = {%d,{%d}}, want {1,{0}} for physical device 0", sym, L->vprops,
         read_i32(p, L->vprops), read_i32(p, L->vprops + 4));
  uint64_t max_p2p;
  memcpy(&max_p2p, p + L->max_p2p, 8);
  if (max_p2p == 0 || max_p2p > (1ull << 40))
    fail("%s props.maxP2pBytes@%d = %llu", sym, L->max_p2p, (unsigned long long)max_p2p);
  if (L->max_multi >= 0 && read_i32(p, L->max_multi) < 1)
    fail("%s props.maxMultiRequestSize@%d = %d", sym, L->max_multi, read_i32(p, L->max_multi));
  if (L->rail_id >= 0 && p[L->rail_id] == SENTINEL && p[L->rail_id + 1] == SENTINEL &&
      p[L->rail_id + 2] == SENTINEL && p[L->rail_id + 3] == SENTINEL)
    fail("%s props.railId/planeId@%d left unwritten", sym, L->rail_id);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One message through this very table, to itself over loopback: listen, connect/accept polled until
 * both return a comm, closeListen, regMr, isend/irecv, test until done, byte check, close. Proves each
 * exported version works end to end, not only that its slots are filled (NCCL 2.28.9 uses v11). */
static void check_net_traffic(const char* sym, const void* t, int version, void* ctx) {
  char handle[128] = {0};
  void *lc = NULL, *sc = NULL, *rc = NULL, *dc = NULL;
  int rc_ = version == 10 ? ((listen_v10_fn)slot(t, 4))(0, handle, &lc)
                          : ((listen_v11_fn)slot(t, 4))(ctx, 0, handle, &lc);
  if (rc_ != 0 || lc == NULL) {
    fail("%s listen returned %d", sym, rc_);
    return;
  }
  double deadline = now_s() + 20;
  int config = -1;
  while ((sc == NULL || rc == NULL) && now_s() < deadline) {
    if (sc == NULL)
      rc_ = version == 10 ? ((connect_v10_fn)slot(t, 5))(0, &config, handle, &sc, &dc)
                          : ((connect_v11_fn)slot(t, 5))(ctx, 0, handle, &sc, &dc);
    if (rc_ != 0) {
      fail("%s connect returned %d", sym, rc_);
      return;
    }
    if (rc == NULL && (rc_ = ((accept_fn)slot(t, 6))(lc, &rc, &dc)) != 0) {
      fail("%s accept returned %d", sym, rc_);
      return;
    }
  }
  ((close_fn)slot(t, 16))(lc);
  if (sc == NULL || rc == NULL) {
    fail("%s connect/accept to itself did not complete in 20 s", sym);
    return;
  }
  enum { N = 65537 };
  static char sbuf[N], rbuf[N + 64];
  for (int i = 0; i < N; ++i) sbuf[i] = (char)(i * 7 + version);
  memset(rbuf, 0, sizeof(rbuf));
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  if (((regmr_fn)slot(t, 7))(sc, sbuf, N, 1, &smh) != 0 ||
      ((regmr_fn)slot(t, 7))(rc, rbuf, sizeof(rbuf), 1, &rmh) != 0) {
    fail("%s regMr failed", sym);
    return;
  }
  void* rdata = rbuf;
  size_t cap = sizeof(rbuf);
  int tag = 0, sdone = 0, rdone = 0, got = -1;
  while ((!sdone || !rdone) && now_s() < deadline) {
    if (rreq == NULL && ((irecv_fn)slot(t, 11))(rc, 1, &rdata, &cap, &tag, &rmh, NULL, &rreq) != 0) {
      fail("%s irecv failed", sym);
      return;
    }
    if (sreq == NULL && ((isend_fn)slot(t, 10))(sc, sbuf, N, 0, smh, NULL, &sreq) != 0) {
      fail("%s isend failed", sym);
      return;
    }
    if (sreq != NULL && !sdone && ((test_fn)slot(t, 13))(sreq, &sdone, NULL) != 0) {
      fail("%s test(send) failed", sym);
      return;
    }
    if (rreq != NULL && !rdone && ((test_fn)slot(t, 13))(rreq, &rdone, &got) != 0) {
      fail("%s test(recv) failed", sym);
      return;
    }
  }
  if (!sdone || !rdone)
    fail("%s a 65537-byte message to itself did not complete in 20 s", sym);
  else if (got != N || memcmp(sbuf, rbuf, N) != 0)
    fail("%s received %d bytes, content %s", sym, got, memcmp(sbuf, rbuf, N) ? "wrong" : "right");
  else
    printf("ok: %s carried 65537 bytes to itself, byte-exact\n", sym);
  ((deregmr_fn)slot(t, 9))(sc, smh);
  ((deregmr_fn)slot(t, 9))(rc, rmh);
  ((close_fn)slot(t, 14))(sc);
  ((close_fn)slot(t, 15))(rc);
}

static void check_net_table(const char* sym, const void* t, int version) {
  /* Slot order of reference §2.2; regMrDmaBuf(8), getDeviceMr(17), irecvConsumed(18), makeVDevice(19)
   * and setNetAttr(21) may be NULL. */
  static const int mandatory[] = {0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16};
  for (size_t i = 0; i < sizeof(mandatory) / sizeof(mandatory[0]); ++i)
    if (slot(t, mandatory[i]) == NULL)
      fail("%s slot %d (offset %d) is NULL", sym, mandatory[i], 8 * mandatory[i]);
  if (version >= 11 && slot(t, 20) == NULL) fail("%s finalize (offset 160) is NULL", sym);
  if (g_failures) return;
  const char* name = (const char*)slot(t, 0);
  void* ctx = NULL;
  int rc;
  if (version == 10) {
    rc = ((init_v10_fn)slot(t, 1))((void*)quiet_logger, NULL);
  } else {
    int config = -1; /* trafficClass undefined */
    rc = ((init_v11_fn)slot(t, 1))(&ctx, 0x1234, &config, (void*)quiet_logger, NULL);
  }
  if (rc != 0) {
    fail("%s init returned %d", sym, rc);
    return;
  }
  int ndev = -1;
  rc = ((devices_fn)slot(t, 2))(&ndev);
  if (rc != 0 || ndev < 1) fail("%s devices returned %d with ndev=%d", sym, rc, ndev);
  unsigned char buf[PROBE_BYTES];
  memset(buf, SENTINEL, sizeof(buf));
  rc = ((props_fn)slot(t, 3))(0, buf);
  static const struct props_layout v10 = {104, 64, 88, -1, -1}, v11 = {112, 64, 88, 104, -1},
                                   v12 = {128, 64, 104, 120, 124};
  if (rc != 0)
    fail("%s getProperties(0) returned %d", sym, rc);
  else
    check_props(sym, buf, version == 10 ? &v10 : (version == 11 ? &v11 : &v12));
  if (!g_failures) check_net_traffic(sym, t, version, ctx);
  if (version >= 11 && ((finalize_fn)slot(t, 20))(ctx) != 0) fail("%s finalize returned non-zero", sym);
  printf("ok: %s name=\"%s\" ndev=%d\n", sym, name ? name : "(null)", ndev);
}

/* Profiler v1..v6 tables: 6 slots, 48 B (name, init, startEvent, stopEvent, recordEventState, finalize). */
static void check_profiler_table(const char* sym, const void* t) {
  for (int i = 0; i < 6; ++i)
    if (slot(t, i) == NULL) fail("%s slot %d (offset %d) is NULL", sym, i, 8 * i);
  if (slot(t, 0) != NULL) printf("ok: %s name=\"%s\", 6 slots set\n", sym, (const char*)slot(t, 0));
}

/* Tuner v2..v5 tables: name, init, getCollInfo, finalize (32 B); v6 adds getChunkSize@32 (may be NULL). */
static void check_tuner_table(const char* sym, const void* t, int version) {
  for (int i = 0; i < 4; ++i)
    if (slot(t, i) == NULL) fail("%s slot %d (offset %d) is NULL", sym, i, 8 * i);
  if (slot(t, 0) != NULL)
    printf("ok: %s (v%d) name=\"%s\", 4 slots set\n", sym, version, (const char*)slot(t, 0));
}

static int cmd_load(const char* path, int nsyms, char** syms) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    fail("dlopen(%s, RTLD_NOW|RTLD_LOCAL): %s", path, dlerror());
    return 1;
  }
  for (int i = 0; i < nsyms; ++i) {
    void* s = dlsym(dl, syms[i]);
    if (s == NULL) {
      fail("%s: symbol %s not found", path, syms[i]);
      continue;
    }
    int v = 0;
    if (sscanf(syms[i], "ncclNetPlugin_v%d", &v) == 1)
      check_net_table(syms[i], s, v);
    else if (sscanf(syms[i], "ncclProfiler_v%d", &v) == 1)
      check_profiler_table(syms[i], s);
    else if (sscanf(syms[i], "ncclTunerPlugin_v%d", &v) == 1)
      check_tuner_table(syms[i], s, v);
    else
      printf("ok: %s present\n", syms[i]);
  }
  dlclose(dl);
  return g_failures ? 1 : 0;
}

static int cmd_name_rule(const char* kind, const char* name, const char* expected) {
  void* dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  char alt[PATH_MAX] = "";
  size_t len = strlen(name);
  int lib_so = strncmp(name, "lib", 3) == 0 && len > 3 && strcmp(name + len - 3, ".so") == 0;
  if (dl == NULL && strchr(name, '/') == NULL && !lib_so) {
    snprintf(alt, sizeof(alt), "libnccl-%s-%s.so", kind, name);
    dl = dlopen(alt, RTLD_NOW | RTLD_LOCAL);
  }
  if (dl == NULL) {
    fail("plugin kind %s, name %s: neither '%s' nor '%s' loads: %s", kind, name, name, alt, dlerror());
    return 1;
  }
  struct link_map* lm = NULL;
  char got[PATH_MAX], want[PATH_MAX];
  if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 || realpath(lm->l_name, got) == NULL ||
      realpath(expected, want) == NULL)
    fail("cannot resolve the loaded path");
  else if (strcmp(got, want) != 0)
    fail("plugin kind %s, name %s resolved to %s, expected %s", kind, name, got, want);
  else
    printf("ok: plugin kind %s, name %s -> %s\n", kind, name, alt[0] ? alt : name);
  dlclose(dl);
  return g_failures ? 1 : 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "load") == 0) return cmd_load(argv[2], argc - 3, argv + 3);
  if (argc == 5 && strcmp(argv[1], "name-rule") == 0) return cmd_name_rule(argv[2], argv[3], argv[4]);
  fprintf(stderr, "usage: %s load PATH SYM... | name-rule KIND NAME EXPECTED_PATH\n", argv[0]);
  return 2;
}
