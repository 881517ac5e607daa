/* rerail bootstrap — rootless, store-less communicator setup for stock NCCL (public C API of
 * librerail-bootstrap.so).
 *
 * The idea (after SageMaker HyperPod's rootless init): every rank derives every address it needs
 * from a job description and a group counter, so no TCPStore and no broadcast from a root is needed.
 *
 *   address(rank, group) = host[rank / ranksPerHost] : portBase + (group*ranksPerHost + rank%ranksPerHost) % portSpan
 *
 * A *group* is a counter the application bumps for every communicator and every recovery, so a
 * re-created communicator never meets a stale socket of its previous life. Rank 0 lives on host 0.
 *
 * Rules NCCL imposes (checked by rerailCommInitStoreless and `rerail-bootstrap check`):
 *   - rank 0 must run on the first host: it starts NCCL's root listener at address(0, group);
 *   - with NCCL_COMM_ID set, NCCL requires a local interface on the same subnet as that address,
 *     on every rank, or every NCCL init in the process fails (ncclSystemError);
 *   - planned ports must not be handed out as ephemeral ports: keep them out of
 *     net.ipv4.ip_local_port_range or list them in net.ipv4.ip_local_reserved_ports.
 *
 * Environment (read by rerailJobFromEnv; RERAIL_DUMP_PARAMS=1 prints them):
 *   RERAIL_HOSTS (alias SLURM_JOB_NODELIST)    "gpu[001-004,010]" or "10.0.0.1,10.0.0.2" or "[fd00::1],..."
 *   RERAIL_RANKS_PER_HOST (alias N_PROC_PER_NODE), RERAIL_PORT_BASE (alias HPCT_PORT_BASE),
 *   RERAIL_PORT_SPAN, RERAIL_JOB_ID (alias SLURM_JOB_ID), RERAIL_ROOTLESS (alias HPCT_USE_ROOTLESS),
 *   RERAIL_BOOT_TIMEOUT_MS, RERAIL_NCCL_LIB (libnccl to dlopen, default libnccl.so.2).
 *
 * Errors: every function returns a rerailResult_t whose values equal ncclResult_t. On error a
 * message naming the bad input is logged as a WARN (prefix BOOTSTRAP/rerail, stderr, filtered by
 * NCCL_DEBUG like NCCL) and kept for rerailGetLastError().
 * Thread-safety: a rerailJob is immutable and may be used from any thread. rerailCommInitStoreless
 * and rerailCommRecover call setenv("NCCL_COMM_ID"): never run them concurrently with each other or
 * with other code that reads or writes the environment.
 * Memory: the caller owns every buffer it passes; rerailJob objects are freed by rerailJobDestroy.
 */
#ifndef RERAIL_BOOTSTRAP_H_
#define RERAIL_BOOTSTRAP_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RERAIL_BOOT_API __attribute__((visibility("default")))

typedef int rerailResult_t; /* same values as ncclResult_t */
#define RERAIL_SUCCESS 0
#define RERAIL_SYSTEM_ERROR 2    /* socket, bind or kernel failure on this host */
#define RERAIL_INTERNAL_ERROR 3
#define RERAIL_INVALID_ARGUMENT 4 /* a NULL pointer, rank out of range, buffer too small */
#define RERAIL_INVALID_USAGE 5   /* bad job description, missing libnccl or NCCL function */
#define RERAIL_REMOTE_ERROR 6    /* peers unreachable before the deadline, or strangers only */

#define RERAIL_UNIQUE_ID_BYTES 128
/* Same size and layout as ncclUniqueId: memcpy it into an ncclUniqueId. */
typedef struct {
  char internal[RERAIL_UNIQUE_ID_BYTES];
} rerailUniqueId_t;

typedef struct rerailJob rerailJob; /* opaque, immutable */

/* Builds a job. hosts: comma list / Slurm node list (required). ranksPerHost >= 1. portBase 1..65535.
 * portSpan >= ranksPerHost (0: 1024). jobId: identity mixed into magics (NULL or "": "rerail").
 * Every host name is resolved now (first getaddrinfo answer, like NCCL). Fails with
 * RERAIL_INVALID_USAGE for a malformed node list, an unknown host, a port out of range, or planned
 * ports overlapping this machine's ephemeral range. */
RERAIL_BOOT_API rerailResult_t rerailJobCreate(const char* hosts, int ranksPerHost, int portBase, int portSpan, const char* jobId,
                               rerailJob** job);
/* Same, from the environment variables listed above. */
RERAIL_BOOT_API rerailResult_t rerailJobFromEnv(rerailJob** job);
RERAIL_BOOT_API void rerailJobDestroy(rerailJob* job); /* NULL is fine */
RERAIL_BOOT_API int rerailJobNumRanks(const rerailJob* job);

/* 1 when RERAIL_ROOTLESS (or HPCT_USE_ROOTLESS) asks frameworks to use this path, else 0. */
RERAIL_BOOT_API int rerailRootlessRequested(void);

/* "host:port" where `rank` listens for `group` (IPv6 in brackets). len includes the NUL. */
RERAIL_BOOT_API rerailResult_t rerailAddress(const rerailJob* job, int rank, uint64_t group, char* buf, size_t len);
/* The NCCL_COMM_ID string of `group` (address of rank 0, host written as given). */
RERAIL_BOOT_API rerailResult_t rerailCommIdString(const rerailJob* job, uint64_t group, char* buf, size_t len);
/* Per-(job, group) 64-bit magic used by the exchange and by RERAIL_ID_JOB_MAGIC. */
RERAIL_BOOT_API uint64_t rerailJobMagic(const rerailJob* job, uint64_t group);

/* Id flags. */
#define RERAIL_ID_NCCL_MAGIC 0 /* NCCL's constant magic: byte-identical to ncclGetUniqueId under NCCL_COMM_ID */
#define RERAIL_ID_JOB_MAGIC 1  /* per-(job, group) magic: peers of another group fail NCCL's handshake */

/* The 128-byte id NCCL's ncclGetUniqueId returns under NCCL_COMM_ID=<rerailCommIdString(group)>,
 * computed locally, byte for byte (NCCL's constant magic). Same as rerailUniqueIdEx(.., RERAIL_ID_NCCL_MAGIC, ..). */
RERAIL_BOOT_API rerailResult_t rerailUniqueId(const rerailJob* job, uint64_t group, rerailUniqueId_t* id);
/* Same, with flags RERAIL_ID_NCCL_MAGIC or RERAIL_ID_JOB_MAGIC (only the first 8 bytes differ). */
RERAIL_BOOT_API rerailResult_t rerailUniqueIdEx(const rerailJob* job, uint64_t group, int flags, rerailUniqueId_t* id);
/* The id for an explicit NCCL_COMM_ID string ("<ipv4|name>:<port>" or "[<ipv6>(%if)]:<port>"). */
RERAIL_BOOT_API rerailResult_t rerailUniqueIdFromString(const char* commId, uint64_t magic, rerailUniqueId_t* id);

/* Rootless all-gather: every rank passes `size` bytes (same size everywhere) and receives all
 * ranks' contributions in rank order in recvbuf (nranks * size bytes). Blocks until complete or
 * timeoutMs (0: RERAIL_BOOT_TIMEOUT_MS), then serves late peers until they say bye (bounded by
 * the same timeout). Binds address(rank, group): use a group not used by a live communicator. */
RERAIL_BOOT_API rerailResult_t rerailAllGather(const rerailJob* job, uint64_t group, int rank, const void* sendbuf, size_t size,
                               void* recvbuf, int timeoutMs);

/* Store-less ncclCommInitRank for all rerailJobNumRanks(job) ranks: builds the group's id, sets
 * NCCL_COMM_ID, calls ncclCommInitRank from the libnccl named by RERAIL_NCCL_LIB (resolved with dlopen;
 * when the application already links libnccl.so.2 this is the same library). newcomm is an
 * ncclComm_t*. Blocking like ncclCommInitRank. flags: RERAIL_ID_*. */
RERAIL_BOOT_API rerailResult_t rerailCommInitStoreless(const rerailJob* job, uint64_t group, int rank, int flags, void* newcomm);

/* Multi-root store-less init (ncclCommInitRankScalable, NCCL >= 2.23): the first rank of each of
 * nRoots blocks (NCCL's block layout) calls ncclGetUniqueId, which starts a root in that process; the
 * ids reach every rank through the rootless exchange of `group` (planned ports); NCCL_COMM_ID is unset.
 * All ranks must pass the same nRoots (1..nranks). timeoutMs 0: RERAIL_BOOT_TIMEOUT_MS. */
RERAIL_BOOT_API rerailResult_t rerailCommInitScalable(const rerailJob* job, uint64_t group, int rank, int nRoots,
                                                      int timeoutMs, void* newcomm);

/* Recovery modes. */
#define RERAIL_RECOVER_SHRINK 0   /* ncclCommShrink(NCCL_SHRINK_ABORT) without excludeRanks; parent aborted. NCCL >= 2.27 */
#define RERAIL_RECOVER_RECREATE 1 /* revoke (if present) + abort, then store-less init with ++*group, same size */

/* In-process recovery of a failed communicator `comm` (an ncclComm_t). *group is advanced for
 * RECREATE; survivors and a replacement rank must all use the new value. newcomm is an ncclComm_t*.
 * A function this libnccl lacks fails with RERAIL_INVALID_USAGE naming it. flags: RERAIL_ID_*. */
RERAIL_BOOT_API rerailResult_t rerailCommRecover(const rerailJob* job, uint64_t* group, int rank, void* comm, const int* excludeRanks,
                                 int nExclude, int mode, int flags, void* newcomm);

/* The message of the last error on this thread ("" if none). Valid until the next call. */
RERAIL_BOOT_API const char* rerailGetLastError(void);

#ifdef __cplusplus
}
#endif
#endif /* RERAIL_BOOTSTRAP_H_ */
