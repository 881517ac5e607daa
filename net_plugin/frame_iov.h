// The iovecs that write the rest of a frame (header, then payload) after `done` bytes of it were
// written: one writev per call, header and payload together while any header byte is left.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "core/core.h"

namespace rr::net {

inline int FrameIov(TxFrame& f, std::size_t done, iovec iov[2]) {
  const std::size_t len = f.hdr.len;
  int cnt = 0;
  if (done < sizeof(Frame)) {
    iov[cnt++] = {reinterpret_cast<uint8_t*>(&f.hdr) + done, sizeof(Frame) - done};
    if (len > 0) iov[cnt++] = {const_cast<uint8_t*>(f.payload), len};
  } else {
    const std::size_t off = done - sizeof(Frame);
    iov[cnt++] = {const_cast<uint8_t*>(f.payload) + off, len - off};
  }
  return cnt;
}

}  // namespace rr::net
