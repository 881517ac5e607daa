#include "engine.h"

#include <sched.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace rr::perf {
namespace {

// dst2 (optional) gets a second copy in the same pass: the GPU writes the output and the send
// slot together, and one pass keeps the emulator's memory traffic close to the GPU's.
template <typename T>
void ReduceT(char* dst, char* dst2, const char* a, const char* b, size_t bytes) {
  T* d = reinterpret_cast<T*>(dst);
  T* d2 = reinterpret_cast<T*>(dst2);
  const T* x = reinterpret_cast<const T*>(a);
  const T* y = reinterpret_cast<const T*>(b);
  const size_t n = bytes / sizeof(T);
  if (d2 == nullptr) {
    for (size_t i = 0; i < n; ++i) d[i] = x[i] + y[i];
  } else {
    for (size_t i = 0; i < n; ++i) d2[i] = d[i] = x[i] + y[i];
  }
}

void Copy(char* dst, const char* src, size_t bytes) {
  if (dst != src && bytes > 0) std::memcpy(dst, src, bytes);
}

// NCCL's function names, as its profiler descriptors carry them (static strings).
const char* NcclFuncName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kAllGather: return "AllGather";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kSendRecv: return "SendRecv";
    case Coll::kAllToAll: return "AllToAll";
  }
  return "Unknown";
}

}  // namespace

void Engine::Reduce(char* dst, char* dst2, const char* a, const char* b, size_t bytes) const {
  if (dtype_ == DataType::kFloat) ReduceT<float>(dst, dst2, a, b, bytes);
  else ReduceT<int32_t>(dst, dst2, a, b, bytes);
}

Status Engine::Bind(const Plan& plan, std::vector<Conn*>* conns) const {
  conns->clear();
  for (const ConnKey& k : plan.conns) {
    Conn* c = comm_->Find(k);
    if (c == nullptr) return Status::Internal("rerail-perf: plan needs a connection that was not set up");
    conns->push_back(c);
  }
  return Status::Ok();
}

bool Engine::TryElem(const Plan& plan, const std::vector<Conn*>& conns, int s, char* in, char* out, Status* err) {
  const Stream& st = plan.streams[s];
  size_t i = pos_[s];
  if (i >= st.elems.size()) return false;
  if (st.gate >= 0 && pos_[st.gate] <= i) return false;
  const Elem& e = st.elems[i];
  Conn* rc = NeedsRecv(e.op) ? conns[st.recv_conn] : nullptr;
  Conn* sc = NeedsSend(e.op) ? conns[st.send_conn] : nullptr;
  if ((rc && !rc->CanConsume()) || (sc && !sc->CanFill())) return false;
  const char* r = rc ? rc->ConsumePtr() : nullptr;
  if (rc && rc->ConsumeSize() != e.bytes) {
    *err = Status::Remote("received " + std::to_string(rc->ConsumeSize()) + " bytes from rank " +
                          std::to_string(rc->peer()) + " channel " + std::to_string(rc->channel()) +
                          " where " + std::to_string(e.bytes) + " were sent");
    return false;
  }
  char* slot = sc ? sc->FillPtr() : nullptr;
  switch (e.op) {
    case ElemOp::kSend: Copy(slot, in + e.src, e.bytes); break;
    case ElemOp::kCopySend: Copy(out + e.dst, in + e.src, e.bytes), Copy(slot, in + e.src, e.bytes); break;
    case ElemOp::kRecvReduceSend: Reduce(slot, nullptr, r, in + e.src, e.bytes); break;
    case ElemOp::kRecvReduceCopySend: Reduce(out + e.dst, slot, r, in + e.src, e.bytes); break;
    case ElemOp::kRecvCopySend: Copy(out + e.dst, r, e.bytes), Copy(slot, r, e.bytes); break;
    case ElemOp::kRecv: Copy(out + e.dst, r, e.bytes); break;
    case ElemOp::kRecvReduceCopy: Reduce(out + e.dst, nullptr, r, in + e.src, e.bytes); break;
    case ElemOp::kCopy: Copy(out + e.dst, in + e.src, e.bytes); break;
  }
  if (sc) sc->Fill(e.bytes);
  if (rc) rc->Consume();
  ++pos_[s];
  return true;
}

Status Engine::Run(const Plan& plan, const std::vector<Conn*>& conns, char* in, char* out, const Deadline& dl) {
  void* task = nullptr;
  if (emu_ != nullptr) {
    void* group = emu_->StartGroup();
    task = emu_->StartColl(group, {NcclFuncName(plan.coll), plan.count,
                                   dtype_ == DataType::kFloat ? "ncclFloat32" : "ncclInt32", "Ring", "Simple",
                                   channels_});
    emu_->Stop(task);
    emu_->Stop(group);
  }
  for (size_t c = 0; c < conns.size(); ++c)
    RR_CHECK(conns[c]->BeginOp(plan.slice_steps, plan.conn_slices[c], emu_, task));
  pos_.assign(plan.streams.size(), 0);
  uint64_t idle_passes = 0;
  while (true) {
    bool progressed = false, streams_done = true;
    Status err;
    if (tick_) tick_();
    for (size_t s = 0; s < plan.streams.size(); ++s) {
      while (TryElem(plan, conns, static_cast<int>(s), in, out, &err)) progressed = true;
      if (!err.ok()) return err;
      streams_done = streams_done && pos_[s] == plan.streams[s].elems.size();
    }
    bool conns_done = true;
    for (Conn* c : conns) {
      RR_CHECK(c->Progress(on_sent_, &progressed));
      conns_done = conns_done && c->OpDone();
    }
    if (streams_done && conns_done) return Status::Ok();
    if (progressed) {
      idle_passes = 0;
      continue;
    }
    // Nothing moved: let the plugin's threads and the other ranks run (2 cores are shared).
    sched_yield();
    if (++idle_passes % 64 == 0) {
      if (dl.Expired())
        return Status::Remote("no progress before the deadline (" + std::string(CollName(plan.coll)) + ", " +
                              std::to_string(plan.size_bytes) + " bytes): a peer or the network is stuck");
    }
  }
}

}  // namespace rr::perf
