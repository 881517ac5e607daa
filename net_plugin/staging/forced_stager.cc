#include "staging/forced_stager.h"

#include <cstring>
#include <thread>

#include "rerail/params.h"

namespace rr::staging {

std::unique_ptr<ForcedStager> ForcedStager::FromParams() {
  if (!Params::Bool(ParamId::ForceStaging)) return nullptr;
  return std::make_unique<ForcedStager>();
}

ForcedStager::Slot& ForcedStager::Get(int key, std::size_t len) {
  auto& p = slots_[key];
  if (!p) p = std::make_unique<Slot>();
  if (p->buf.size() < len) p->buf.resize(len);
  return *p;
}

void ForcedStager::Copy(Slot& s, void* dst, const void* src, std::size_t len) {
  ++s.ticket;
  Status st = engine_.Submit(CopyJob{dst, src, len, &s.flag, s.ticket});
  if (!st.ok()) {   // a stopped or refused engine: copy here, the bytes must still be right
    if (len) std::memcpy(dst, src, len);
    s.flag.store(s.ticket, std::memory_order_release);
  }
  while (s.flag.load(std::memory_order_acquire) != s.ticket) std::this_thread::yield();
  staged_ += len;
}

const uint8_t* ForcedStager::Pack(int key, const uint8_t* payload, std::size_t len) {
  if (len == 0) return payload;
  Slot& s = Get(key, len);
  Copy(s, s.buf.data(), payload, len);
  return s.buf.data();
}

uint8_t* ForcedStager::Divert(int key, uint8_t* dst, std::size_t len) {
  if (dst == nullptr || len == 0) return dst;   // discarded payloads are not staged
  Slot& s = Get(key, len);
  s.dst = dst;
  s.len = len;
  return s.buf.data();
}

void ForcedStager::Land(int key) {
  auto it = slots_.find(key);
  if (it == slots_.end() || it->second->dst == nullptr) return;
  Slot& s = *it->second;
  Copy(s, s.dst, s.buf.data(), s.len);
  s.dst = nullptr;
}

}  // namespace rr::staging
