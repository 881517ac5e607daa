// libFuzzer target: the sender's handling of control frames (acks + credits, heartbeats, link-down
// notices: wire.h) in the sans-I/O core (net_plugin/core: SendCore::OnControl), driven as the TCP shell
// drives it, with sends, frame writes, control frames and link events taken from the input.
// Invariants:
//   * every frame handed out is a heartbeat or link-down notice without payload, or a chunk of a posted message: seq < posted, offset + len <= total ==
//     the message's size, len <= chunk, this connection's id, and its payload bytes are the message's
//     bytes at that offset (read in full: ASan checks the pointer lies in a live buffer or copy);
//   * a message's buffer is freed as soon as its send completes: a later read of it is an ASan report;
//   * every completion names a posted, not yet completed message with its size; acked <= posted.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/core.h"
#include "wire.h"

using namespace rr::net;

namespace {

constexpr uint64_t kConn = 0x5151;
constexpr int kLinks = 3;

struct Msg {
  uint64_t seq = 0;
  std::vector<uint8_t> buf;  // freed (emptied) on completion
  size_t size = 0;
  bool done = false;
};

struct Input {
  const uint8_t* p;
  size_t n;
  bool Take(void* out, size_t k) {
    if (n < k) return false;
    std::memcpy(out, p, k);
    p += k, n -= k;
    return true;
  }
  uint8_t Byte() {
    uint8_t b = 0;
    Take(&b, 1);
    return b;
  }
};

// Message seq holds kPattern[seq % 251 + offset ...]: filled and checked with memcpy/memcmp (a
// per-byte loop under coverage instrumentation was most of the harness's time).
constexpr size_t kMaxMsg = 3 * 4096;
const std::vector<uint8_t>& PatternTable() {
  static const std::vector<uint8_t> t = [] {
    std::vector<uint8_t> v(251 + kMaxMsg);
    uint32_t x = 0x9e3779b9u;
    for (auto& b : v) x = x * 1664525u + 1013904223u, b = static_cast<uint8_t>(x >> 24);
    return v;
  }();
  return t;
}
const uint8_t* Pattern(uint64_t seq, uint64_t off) { return PatternTable().data() + seq % 251 + off; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoreConfig cfg;
  cfg.chunk = 4096;
  cfg.eager_max = 1024;
  cfg.eager_pool = 8192;
  uint64_t now = 1'000'000'000;
  std::vector<SendCore::LinkSpec> specs(kLinks);
  for (int l = 0; l < kLinks; ++l) specs[l].rail = l, specs[l].name = "fuzz";
  SendCore core(cfg, kConn, specs, nullptr, now);
  std::vector<std::unique_ptr<Msg>> msgs;  // index = seq
  bool up[kLinks] = {};
  Input in{data, size};
  while (in.n > 0) {
    const uint8_t op = in.Byte();
    const int link = (op >> 3) % kLinks;
    switch (op & 7) {
      case 0: {  // NCCL posts a send
        uint16_t len = 0;
        in.Take(&len, sizeof(len));
        auto m = std::make_unique<Msg>();
        m->size = len % (kMaxMsg + 1);
        m->seq = core.posted();
        m->buf.assign(Pattern(m->seq, 0), Pattern(m->seq, m->size));
        bool posted = false;
        if (!core.Isend(now, m->buf.data(), m->size, m.get(), &posted).ok() || !posted) break;
        if (core.posted() != msgs.size() + 1) std::abort();
        msgs.push_back(std::move(m));
        break;
      }
      case 1:
      case 2: {  // a control frame arrives on a link (case 2: valid magic, this conn, len 0, small numbers)
        Frame f;
        std::memset(&f, 0, sizeof(f));
        if (!in.Take(&f, sizeof(f))) return 0;
        if ((op & 7) == 2) {
          f.magic_type = kFrameMagic | (f.magic_type & 0x1ffu);
          f.conn = static_cast<uint32_t>(kConn);
          f.len = 0;
          f.seq %= 12;
          f.offset %= 12;
          f.epoch %= 4;
        }
        if (!up[link]) break;  // control frames arrive only on an established link
        core.OnControl(now, link, f);
        break;
      }
      case 3: {  // the link can take a frame: write it in full
        if (!up[link]) break;
        TxFrame tx;
        if (!core.NextTx(now, link, &tx)) break;
        const Frame& h = tx.hdr;
        if (!FrameValid(h) || h.conn != static_cast<uint32_t>(kConn)) std::abort();
        if (TypeOf(h) != FrameType::kData) {  // sender -> receiver control: heartbeat or link-down notice
          if (h.len != 0 || (TypeOf(h) != FrameType::kHeartbeat && TypeOf(h) != FrameType::kLinkDown)) std::abort();
          if (TypeOf(h) == FrameType::kLinkDown && h.seq >= static_cast<uint64_t>(kLinks)) std::abort();
          core.OnWritten(link, sizeof(Frame));
          core.OnTxDone(now, link, h);
          break;
        }
        if (h.seq >= msgs.size() || h.len > cfg.chunk || h.total != msgs[h.seq]->size || h.offset > h.total ||
            h.len > h.total - h.offset)
          std::abort();
        if (h.len > 0 && tx.payload == nullptr) std::abort();
        if (h.len > 0 && std::memcmp(tx.payload, Pattern(h.seq, h.offset), h.len) != 0) {  // wrong bytes
          std::fprintf(stderr, "link %d: frame seq %llu offset %llu len %u total %llu: bytes differ (acked %llu)\n", link,
                       static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(h.offset), h.len,
                       static_cast<unsigned long long>(h.total), static_cast<unsigned long long>(core.acked()));
          std::abort();
        }
        core.OnWritten(link, sizeof(Frame) + h.len);
        core.OnTxDone(now, link, h);
        break;
      }
      case 4:  // transport error on the link
        core.OnLinkError(now, link, "fuzz error", (op & 0x80) != 0);
        break;
      case 5: {  // link commands: connects succeed or fail, closes drop the transport
        LinkCommand c;
        while (core.NextCommand(&c)) {
          if (c.link < 0 || c.link >= kLinks) std::abort();
          if (c.kind == LinkCommand::kClose) {
            up[c.link] = false;
          } else if (op & 0x40) {
            core.OnConnectFailed(now, c.link, "fuzz refused");
          } else {
            up[c.link] = true;
            core.OnLinkUp(now, c.link);
          }
        }
        break;
      }
      case 6: {  // time passes
        now += (static_cast<uint64_t>(in.Byte()) + 1) * 20'000'000;
        if (core.SampleDue(now)) {
          std::vector<LinkSample> samples(kLinks);
          for (int l = 0; l < kLinks; ++l) {
            samples[l].valid = up[l];
            samples[l].streams = 1;
            samples[l].s[0].acked_bytes = now / 1000;  // progressing: no stall unless the input says so
            if (op & 0x80) samples[l].s[0].acked_bytes = 0, samples[l].s[0].in_flight = 100;
          }
          core.OnSamples(now, samples);
        }
        core.Poll(now);
        bool ready = false;
        (void)core.Ready(now, &ready);
        break;
      }
      case 7: {  // completions go back to NCCL, which may reuse the buffer at once
        Completion c;
        while (core.NextCompletion(&c)) {
          auto* m = static_cast<Msg*>(c.owner);
          bool known = false;
          for (auto& x : msgs) known |= x.get() == m;
          if (!known || m->done || c.size != m->size) std::abort();
          m->done = true;
          std::vector<uint8_t>().swap(m->buf);
        }
        break;
      }
    }
    if (core.acked() > core.posted()) std::abort();
  }
  return 0;
}
