#include "conn.h"

#include <string>

#include "rerail/log.h"

namespace rr::perf {

Conn::~Conn() {
  if (comm_ == nullptr) return;
  if (mh_ != nullptr) (void)net_->DeregMr(comm_, mh_);
  rrNcclResult_t rc = is_send_ ? net_->CloseSend(comm_) : net_->CloseRecv(comm_);
  if (rc != rrNcclSuccess)
    RR_WARN("close%s (peer %d, channel %d) returned %s", is_send_ ? "Send" : "Recv", peer_, channel_,
            netdrv::ResultName(rc));
}

Status Conn::Fail(const char* call, int rc) const {
  return Status(static_cast<Code>(rc), std::string(call) + " on the " + (is_send_ ? "send" : "recv") +
                                           " connection to rank " + std::to_string(peer_) + " channel " +
                                           std::to_string(channel_) + " (device " + std::to_string(dev_) +
                                           ") returned " + netdrv::ResultName(static_cast<rrNcclResult_t>(rc)));
}

Status Conn::Attach(void* comm) {
  comm_ = comm;
  rrNcclResult_t rc = net_->RegMr(comm_, buf_.data(), buf_.size(), RR_NCCL_PTR_HOST, &mh_);
  if (rc != rrNcclSuccess) return Fail("regMr", rc);
  return Status::Ok();
}

Status Conn::BeginOp(int slice_steps, uint64_t nslices, prof::NcclEmu* emu, void* task) {
  bool idle = is_send_ ? (filled_ == done_) : (posted_ == consumed_);
  if (!idle) return Status::Internal("rerail-perf: connection still busy at the start of an operation");
  slice_steps_ = slice_steps;
  nslices_ = nslices;
  filled_ = posted_ = done_ = arrived_ = consumed_ = 0;
  if (emu_ != nullptr) emu_->Stop(op_);  // previous op never finished (an error stopped the run)
  emu_ = emu;
  op_ = emu != nullptr ? emu->StartProxyOp(task, channel_, peer_, static_cast<int>(nslices),
                                           static_cast<int>(SliceCapacity()), is_send_)
                       : nullptr;
  if (emu_ != nullptr && nslices == 0) emu_->Stop(op_), op_ = nullptr, emu_ = nullptr;  // nothing to move
  return Status::Ok();
}

void* Conn::StartStep(int k, uint64_t slice) {
  if (emu_ == nullptr) return nullptr;
  // A post the plugin refused (NULL request) is retried with the step already started.
  if (!step_open_[k]) emu_->StartProxyStep(&steps_[k], op_, static_cast<int>(slice));
  step_open_[k] = true;
  return &steps_[k];
}

void Conn::StopStep(int k) {
  if (emu_ == nullptr) return;
  emu_->StopProxyStep(&steps_[k]);
  step_open_[k] = false;
  uint64_t finished = is_send_ ? done_ : arrived_;
  if (finished == nslices_) emu_->Stop(op_), op_ = nullptr, emu_ = nullptr;
}

Status Conn::Progress(const BytesFn& on_sent, bool* progressed) {
  if (is_send_) {
    while (posted_ < filled_) {
      int k = SlotIndex(posted_);
      void* req = nullptr;
      void* phandle = StartStep(k, posted_);
      rrNcclResult_t rc = net_->Isend(comm_, SlotPtr(posted_), sizes_[k], tag_, mh_, phandle, &req);
      if (rc != rrNcclSuccess) return Fail("isend", rc);
      if (req == nullptr) break;  // plugin cannot take it now: retry on the next pass
      reqs_[k] = req, ++posted_, *progressed = true;
    }
    if (done_ < posted_) {
      int k = SlotIndex(done_), done = 0;
      rrNcclResult_t rc = net_->Test(reqs_[k], &done, nullptr);
      if (rc != rrNcclSuccess) return Fail("test(send)", rc);
      if (done) on_sent(dev_, sizes_[k]), ++done_, *progressed = true, StopStep(k);
    }
    return Status::Ok();
  }
  while (posted_ < nslices_ && posted_ < consumed_ + Slots()) {
    int k = SlotIndex(posted_);
    void* data = SlotPtr(posted_);
    size_t cap = SliceCapacity();
    int tag = tag_;
    void* phandle = StartStep(k, posted_);
    void* req = nullptr;
    rrNcclResult_t rc = net_->Irecv(comm_, 1, &data, &cap, &tag, &mh_, &phandle, &req);
    if (rc != rrNcclSuccess) return Fail("irecv", rc);
    if (req == nullptr) break;
    reqs_[k] = req, ++posted_, *progressed = true;
  }
  if (arrived_ < posted_) {
    int k = SlotIndex(arrived_), done = 0, size = 0;
    rrNcclResult_t rc = net_->Test(reqs_[k], &done, &size);
    if (rc != rrNcclSuccess) return Fail("test(recv)", rc);
    if (done) sizes_[k] = static_cast<size_t>(size), ++arrived_, *progressed = true, StopStep(k);
  }
  return Status::Ok();
}

}  // namespace rr::perf
