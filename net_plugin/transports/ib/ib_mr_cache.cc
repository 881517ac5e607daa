#include "transports/ib/ib_mr_cache.h"

#include <unistd.h>

#include <algorithm>

#include "transports/ib/ib_device.h"

namespace rr::ib {

Status VerbsRegistrar::Register(int rail, void* addr, size_t len, uint32_t* lkey, uint32_t* rkey, void** token) {
  std::unique_ptr<IbMr> mr;
  RR_CHECK(IbMr::Register(*rails_[rail], addr, len,
                          vx::kAccessLocalWrite | vx::kAccessRemoteWrite | vx::kAccessRemoteRead, &mr));
  *lkey = mr->lkey();
  *rkey = mr->rkey();
  *token = mr.release();
  return Status::Ok();
}

void VerbsRegistrar::Deregister(int, void* token) { delete static_cast<IbMr*>(token); }

MrCache::MrCache(MrRegistrar* registrar, size_t page) : reg_(registrar), page_(page) {
  if (page_ == 0) page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

MrCache::~MrCache() {
  for (auto& e : entries_) Release(e.get());
}

size_t MrCache::entries() const {
  std::lock_guard<std::mutex> g(mu_);
  return entries_.size();
}

void MrCache::Release(MrHandle* h) {
  for (size_t r = 0; r < h->tokens.size(); ++r)
    if (h->tokens[r] != nullptr) reg_->Deregister(static_cast<int>(r), h->tokens[r]);
  h->tokens.clear();
}

Status MrCache::Register(void* addr, size_t len, MrHandle** out) {
  if (addr == nullptr || len == 0) return Status::InvalidArg("regMr of an empty range");
  uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  uintptr_t base = a & ~(static_cast<uintptr_t>(page_) - 1);
  size_t alen = (a + len - base + page_ - 1) / page_ * page_;
  std::lock_guard<std::mutex> g(mu_);
  for (auto& e : entries_) {
    if (base >= e->base && base + alen <= e->base + e->len) {
      ++e->refs;
      *out = e.get();
      return Status::Ok();
    }
  }
  auto h = std::make_unique<MrHandle>();
  h->base = base;
  h->len = alen;
  h->keys.resize(reg_->rails());
  h->tokens.assign(reg_->rails(), nullptr);
  for (int r = 0; r < reg_->rails(); ++r) {
    Status st = reg_->Register(r, reinterpret_cast<void*>(base), alen, &h->keys[r].lkey, &h->keys[r].rkey, &h->tokens[r]);
    if (!st.ok()) {
      Release(h.get());  // the rails done so far; no partial handle escapes
      return Status(st.code(), "regMr on rail " + std::to_string(r) + ": " + st.message());
    }
  }
  h->refs = 1;
  *out = h.get();
  entries_.push_back(std::move(h));
  return Status::Ok();
}

Status MrCache::Deregister(MrHandle* h) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [h](const auto& e) { return e.get() == h; });
  if (it == entries_.end()) return Status::Internal("deregMr of a handle this comm never registered");
  if (--h->refs > 0) return Status::Ok();
  Release(h);
  entries_.erase(it);
  return Status::Ok();
}

}  // namespace rr::ib
