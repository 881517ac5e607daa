// ForcedStager: RERAIL_FORCE_STAGING=1 sends every chunk of a comm's data path through the CPU staging
// backend, so the functional and fault suites exercise staging on hosts without a GPU.
//   sender:   Pack(key, payload, len) copies the payload into the stream's bounce slot through the
//             copy engine, waits for the slot's ready flag, and returns the slot: the stream writes the
//             frame from there. A stream fetches its next frame only once the previous one is fully
//             written, so its slot is reused only after the wire is done with it.
//   receiver: Divert(key, dst, len) returns the slot the stream reads the payload into and remembers
//             dst; Land(key) unpacks the slot into dst and returns once the bytes are there (the
//             iflush point: the chunk is reported placed only after it).
// `key` names one stream of one link (link index * 256 + stream). One owner thread (the comm's).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "staging/copy_engine.h"

namespace rr::staging {

class ForcedStager {
 public:
  // nullptr unless RERAIL_FORCE_STAGING=1.
  static std::unique_ptr<ForcedStager> FromParams();

  const uint8_t* Pack(int key, const uint8_t* payload, std::size_t len);
  uint8_t* Divert(int key, uint8_t* dst, std::size_t len);
  void Land(int key);
  uint64_t staged_bytes() const { return staged_; }

 private:
  struct Slot {
    std::vector<uint8_t> buf;
    uint8_t* dst = nullptr;   // receiver: the posted buffer the slot lands in
    std::size_t len = 0;
    std::atomic<uint64_t> flag{0};
    uint64_t ticket = 0;
  };
  Slot& Get(int key, std::size_t len);
  void Copy(Slot& s, void* dst, const void* src, std::size_t len);

  CpuCopyEngine engine_;
  std::unordered_map<int, std::unique_ptr<Slot>> slots_;
  uint64_t staged_ = 0;
};

}  // namespace rr::staging
