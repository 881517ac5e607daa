#include <cstring>

#include "oob.h"
#include "rerail/boot/exchange.h"
#include "rerail/boot/job.h"

namespace rr::perf {
namespace {

// Oob over the bootstrap's rootless all-gather. Its blobs are fixed-size, so every call is two
// exchanges on fresh groups: the sizes, then the blobs padded to the largest.
class BootOob : public Oob {
 public:
  BootOob(std::unique_ptr<boot::Job> job, int rank, int timeout_ms)
      : job_(std::move(job)), rank_(rank), timeout_ms_(timeout_ms) {}
  int Rank() const override { return rank_; }
  int Size() const override { return job_->nranks(); }

  Status AllGather(const std::string& mine, std::vector<std::string>* all) override {
    uint64_t n = mine.size();
    std::vector<std::string> sizes;
    RR_CHECK(Round(std::string(reinterpret_cast<const char*>(&n), sizeof(n)), &sizes));
    uint64_t max = 1;
    std::vector<uint64_t> lens;
    for (const std::string& s : sizes) {
      uint64_t v = 0;
      std::memcpy(&v, s.data(), sizeof(v));
      lens.push_back(v);
      max = std::max(max, v);
    }
    std::string padded = mine;
    padded.resize(max, '\0');
    RR_CHECK(Round(padded, all));
    for (size_t r = 0; r < all->size(); ++r) (*all)[r].resize(lens[r]);
    return Status::Ok();
  }

 private:
  Status Round(const std::string& blob, std::vector<std::string>* out) {
    boot::ExchangeOptions opts;
    opts.group = ++group_;
    opts.rank = rank_;
    opts.blob = blob;
    opts.timeout_ms = static_cast<uint64_t>(timeout_ms_);
    return boot::AllGather(*job_, opts, out);
  }

  std::unique_ptr<boot::Job> job_;
  int rank_, timeout_ms_;
  uint64_t group_ = 1000;  // away from the groups a job's NCCL communicators would use
};

}  // namespace

Status MakeBootOob(int rank, int size, int timeout_ms, std::unique_ptr<Oob>* out) {
  boot::JobSpec spec;
  RR_CHECK(boot::JobSpecFromEnv(&spec));
  spec.nranks = size;
  std::unique_ptr<boot::Job> job;
  RR_CHECK(boot::Job::Create(spec, &job));
  *out = std::make_unique<BootOob>(std::move(job), rank, timeout_ms);
  return Status::Ok();
}

}  // namespace rr::perf
