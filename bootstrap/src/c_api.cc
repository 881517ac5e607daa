// The exported C API (rerail/bootstrap.h): argument checks, error text, and nothing else; the work
// happens in the C++ API. No exception crosses this boundary.
#include "rerail/bootstrap.h"

#include <cstring>
#include <string>

#include "rerail/boot/exchange.h"
#include "rerail/boot/nccl.h"
#include "rerail/log.h"
#include "rerail/params.h"

struct rerailJob {
  std::unique_ptr<rr::boot::Job> job;
};

namespace {

// initial-exec: static TLS (glibc keeps a surplus for dlopened libraries), no __tls_get_addr block per
// thread. gcc 12's LeakSanitizer crashes scanning those dynamic blocks once threads that used them have
// exited (BootCApi.AllGatherAcrossThreads under scripts/test.sh --sanitize address).
__attribute__((tls_model("initial-exec"))) thread_local std::string t_last_error;

rerailResult_t Fail(const rr::Status& s) {
  try {  // called from Guard's catch handlers too: must not throw itself
    t_last_error = s.ToString();
    RR_WARN("%s", s.message().c_str());
  } catch (...) {
    t_last_error.clear();
  }
  return static_cast<rerailResult_t>(s.code());
}

rerailResult_t Done(const rr::Status& s) {
  if (!s.ok()) return Fail(s);
  t_last_error.clear();
  return RERAIL_SUCCESS;
}

template <typename F>
rerailResult_t Guard(F&& f) {
  rr::log::SetPrefix("BOOTSTRAP/rerail");
  try {
    return Done(f());
  } catch (const std::exception& e) {
    try {
      return Fail(rr::Status::Internal(std::string("unexpected exception: ") + e.what()));
    } catch (...) {  // out of memory while reporting it
    }
  } catch (...) {
    try {
      return Fail(rr::Status::Internal("unexpected exception"));
    } catch (...) {
    }
  }
  return RERAIL_INTERNAL_ERROR;
}

rr::Status CopyOut(const std::string& s, char* buf, size_t len) {
  if (buf == nullptr || len < s.size() + 1)
    return rr::Status::InvalidArg("buffer of " + std::to_string(len) + " bytes is too small for '" + s + "'");
  std::memcpy(buf, s.c_str(), s.size() + 1);
  return rr::Status::Ok();
}

rr::Status CheckJob(const rerailJob* job, int rank) {
  if (job == nullptr || !job->job) return rr::Status::InvalidArg("job is NULL");
  if (rank < 0 || rank >= job->job->nranks())
    return rr::Status::InvalidArg("rank " + std::to_string(rank) + " is outside 0.." +
                                  std::to_string(job->job->nranks() - 1));
  return rr::Status::Ok();
}

rr::Status MakeJob(const rr::boot::JobSpec& spec, rerailJob** out) {
  if (out == nullptr) return rr::Status::InvalidArg("job output pointer is NULL");
  auto j = std::make_unique<rerailJob>();
  RR_CHECK(rr::boot::Job::Create(spec, &j->job));
  *out = j.release();
  return rr::Status::Ok();
}

}  // namespace

extern "C" {

rerailResult_t rerailJobCreate(const char* hosts, int ranksPerHost, int portBase, int portSpan, const char* jobId,
                               rerailJob** job) {
  return Guard([&]() -> rr::Status {
    if (hosts == nullptr) return rr::Status::InvalidArg("hosts is NULL");
    rr::boot::JobSpec spec;
    RR_CHECK(rr::boot::ExpandHostList(hosts, &spec.hosts));
    spec.ranks_per_host = ranksPerHost;
    spec.port_base = portBase;
    spec.port_span = portSpan == 0 ? 1024 : portSpan;
    spec.job_id = jobId ? jobId : "";
    return MakeJob(spec, job);
  });
}

rerailResult_t rerailJobFromEnv(rerailJob** job) {
  return Guard([&]() -> rr::Status {
    rr::boot::JobSpec spec;
    RR_CHECK(rr::boot::JobSpecFromEnv(&spec));
    return MakeJob(spec, job);
  });
}

void rerailJobDestroy(rerailJob* job) { delete job; }

int rerailJobNumRanks(const rerailJob* job) { return job && job->job ? job->job->nranks() : 0; }

int rerailRootlessRequested(void) {
  try {
    return rr::boot::RootlessRequested() ? 1 : 0;
  } catch (...) {  // no exception crosses the C API
    return 0;
  }
}

rerailResult_t rerailAddress(const rerailJob* job, int rank, uint64_t group, char* buf, size_t len) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, rank));
    return CopyOut(job->job->Address(rank, group).ToString(), buf, len);
  });
}

rerailResult_t rerailCommIdString(const rerailJob* job, uint64_t group, char* buf, size_t len) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, 0));
    return CopyOut(job->job->CommIdString(0, group), buf, len);
  });
}

uint64_t rerailJobMagic(const rerailJob* job, uint64_t group) {
  try {
    return job && job->job ? job->job->Magic(group) : 0;
  } catch (...) {  // no exception crosses the C API (0: no magic, as for a NULL job)
    return 0;
  }
}

rerailResult_t rerailUniqueId(const rerailJob* job, uint64_t group, rerailUniqueId_t* id) {
  return rerailUniqueIdEx(job, group, RERAIL_ID_NCCL_MAGIC, id);
}

rerailResult_t rerailUniqueIdEx(const rerailJob* job, uint64_t group, int flags, rerailUniqueId_t* id) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, 0));
    if (id == nullptr) return rr::Status::InvalidArg("id is NULL");
    if (flags != RERAIL_ID_NCCL_MAGIC && flags != RERAIL_ID_JOB_MAGIC)
      return rr::Status::InvalidArg("unknown id flags " + std::to_string(flags));
    return rr::boot::JobNcclId(*job->job, group, flags == RERAIL_ID_JOB_MAGIC,
                               reinterpret_cast<unsigned char*>(id->internal));
  });
}

rerailResult_t rerailUniqueIdFromString(const char* commId, uint64_t magic, rerailUniqueId_t* id) {
  return Guard([&]() -> rr::Status {
    if (commId == nullptr || id == nullptr) return rr::Status::InvalidArg("commId or id is NULL");
    return rr::boot::BuildNcclId(commId, magic, reinterpret_cast<unsigned char*>(id->internal));
  });
}

rerailResult_t rerailAllGather(const rerailJob* job, uint64_t group, int rank, const void* sendbuf, size_t size,
                               void* recvbuf, int timeoutMs) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, rank));
    if (sendbuf == nullptr || recvbuf == nullptr || size == 0)
      return rr::Status::InvalidArg("all-gather needs non-NULL buffers and size > 0");
    RR_CHECK(rr::Params::Load());
    rr::boot::ExchangeOptions o;
    o.group = group;
    o.rank = rank;
    o.blob.assign(static_cast<const char*>(sendbuf), size);
    o.timeout_ms = timeoutMs > 0 ? static_cast<uint64_t>(timeoutMs)
                                 : static_cast<uint64_t>(rr::Params::Int(rr::ParamId::BootTimeoutMs));
    std::vector<std::string> blobs;
    RR_CHECK(rr::boot::AllGather(*job->job, o, &blobs));
    for (size_t i = 0; i < blobs.size(); ++i) std::memcpy(static_cast<char*>(recvbuf) + i * size, blobs[i].data(), size);
    return rr::Status::Ok();
  });
}

rerailResult_t rerailCommInitStoreless(const rerailJob* job, uint64_t group, int rank, int flags, void* newcomm) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, rank));
    if (newcomm == nullptr) return rr::Status::InvalidArg("newcomm is NULL");
    rr::boot::NcclLib* nccl = nullptr;
    RR_CHECK(rr::boot::NcclLib::Default(&nccl));
    return rr::boot::CommInitStoreless(*nccl, *job->job, group, rank, flags == RERAIL_ID_JOB_MAGIC,
                                       static_cast<void**>(newcomm));
  });
}

rerailResult_t rerailCommInitScalable(const rerailJob* job, uint64_t group, int rank, int nRoots, int timeoutMs,
                                      void* newcomm) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, rank));
    if (newcomm == nullptr) return rr::Status::InvalidArg("newcomm is NULL");
    RR_CHECK(rr::Params::Load());
    rr::boot::NcclLib* nccl = nullptr;
    RR_CHECK(rr::boot::NcclLib::Default(&nccl));
    uint64_t timeout = timeoutMs > 0 ? static_cast<uint64_t>(timeoutMs)
                                     : static_cast<uint64_t>(rr::Params::Int(rr::ParamId::BootTimeoutMs));
    return rr::boot::CommInitScalable(*nccl, *job->job, group, rank, nRoots, timeout, static_cast<void**>(newcomm));
  });
}

rerailResult_t rerailCommRecover(const rerailJob* job, uint64_t* group, int rank, void* comm, const int* excludeRanks,
                                 int nExclude, int mode, int flags, void* newcomm) {
  return Guard([&]() -> rr::Status {
    RR_CHECK(CheckJob(job, rank));
    if (mode != RERAIL_RECOVER_SHRINK && mode != RERAIL_RECOVER_RECREATE)
      return rr::Status::InvalidArg("unknown recovery mode " + std::to_string(mode));
    rr::boot::NcclLib* nccl = nullptr;
    RR_CHECK(rr::boot::NcclLib::Default(&nccl));
    return rr::boot::Recover(*nccl, *job->job,
                             mode == RERAIL_RECOVER_SHRINK ? rr::boot::RecoverMode::kShrink : rr::boot::RecoverMode::kRecreate,
                             group, rank, comm, excludeRanks, nExclude, flags == RERAIL_ID_JOB_MAGIC,
                             static_cast<void**>(newcomm));
  });
}

const char* rerailGetLastError(void) { return t_last_error.c_str(); }

}  // extern "C"
