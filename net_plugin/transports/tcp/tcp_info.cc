// rerail — the kernel's view of one TCP stream (TCP_INFO), read with the UAPI layout of <linux/tcp.h>
// (glibc's <netinet/tcp.h> stops before tcpi_bytes_acked). Kept in its own file because the two
// headers cannot be included together.
#include <linux/tcp.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "tcp.h"

namespace rr::net::tcp {

bool ReadTcpProgress(int fd, TcpProgress* out) {
  tcp_info ti{};
  socklen_t len = sizeof(ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return false;
  // tcpi_bytes_acked exists since Linux 4.1; an older kernel returns a shorter struct.
  if (len < offsetof(tcp_info, tcpi_bytes_acked) + sizeof(ti.tcpi_bytes_acked)) return false;
  out->unacked = ti.tcpi_unacked;
  out->bytes_acked = ti.tcpi_bytes_acked;
  out->notsent_bytes = len >= offsetof(tcp_info, tcpi_notsent_bytes) + sizeof(ti.tcpi_notsent_bytes) ? ti.tcpi_notsent_bytes : 0;
  out->min_rtt_us = len >= offsetof(tcp_info, tcpi_min_rtt) + sizeof(ti.tcpi_min_rtt) && ti.tcpi_min_rtt != ~0u ? ti.tcpi_min_rtt : 0;
  out->rwnd_limited_us = len >= offsetof(tcp_info, tcpi_rwnd_limited) + sizeof(ti.tcpi_rwnd_limited) ? ti.tcpi_rwnd_limited : 0;
  out->snd_wnd = len >= offsetof(tcp_info, tcpi_snd_wnd) + sizeof(ti.tcpi_snd_wnd) ? ti.tcpi_snd_wnd : UINT64_MAX;
  int outq = 0;
  out->outq_bytes = ioctl(fd, SIOCOUTQ, &outq) == 0 && outq > 0 ? static_cast<uint32_t>(outq) : 0;
  return true;
}

}  // namespace rr::net::tcp
