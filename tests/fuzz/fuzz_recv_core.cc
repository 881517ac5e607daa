// libFuzzer target: the receiver's frame handling in the sans-I/O core (net_plugin/core:
// RecvCore::OnFrame and friends), driven as the TCP shell drives it, with frames and link events
// taken from the input. ASan checks that every kPlace/kStash destination lies inside a buffer that
// was posted (or a stash), and the core must never report more bytes than a receive's capacity.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "core/core.h"
#include "wire.h"

using namespace rr::net;

namespace {

constexpr uint64_t kConn = 0x1234;
constexpr int kLinks = 3;
constexpr int kStreams = 2;

struct Posted {
  std::vector<uint8_t> buf;
  void* slot = nullptr;
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

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CoreConfig cfg;
  cfg.chunk = 4096;
  RecvCore core(cfg, kConn, cfg.chunk, nullptr);
  std::deque<std::unique_ptr<Posted>> posted;
  uint64_t now = 1'000'000'000;
  for (int l = 0; l < kLinks; ++l) core.OnLinkUp(now, l, 0, l, kStreams, "fuzz link");
  // Per (link, stream): the action of the last header whose payload is still to be read.
  RxAction pending[kLinks][kStreams] = {};
  Input in{data, size};
  while (in.n > 0) {
    const uint8_t op = in.Byte();
    const int link = (op >> 3) % kLinks;
    const int stream = (op >> 5) % kStreams;
    switch (op & 7) {
      case 0: {  // NCCL posts a receive
        uint16_t cap = 0;
        in.Take(&cap, sizeof(cap));
        auto p = std::make_unique<Posted>();
        p->buf.resize(cap % 20000);
        bool ok = false;
        if (!core.Irecv(now, p->buf.data(), p->buf.size(), p.get(), &ok, &p->slot).ok()) break;
        if (ok) posted.push_back(std::move(p));
        break;
      }
      case 1:
      case 2: {  // a frame header arrives (case 2: with a valid magic and this connection's id)
        Frame f;
        std::memset(&f, 0, sizeof(f));
        if (!in.Take(&f, sizeof(f))) return 0;
        if ((op & 7) == 2) {
          f.magic_type = kFrameMagic | (f.magic_type & 0x1ffu);
          f.conn = static_cast<uint32_t>(kConn);
          f.len %= 3 * cfg.chunk;
          f.seq %= 8;
          f.offset %= 5 * cfg.chunk;
          f.total %= 5 * cfg.chunk + 1;
          f.epoch %= 3;
        }
        RxAction& pa = pending[link][stream];
        if (pa.kind != RxAction::kNone) break;  // the shell reads the payload before the next header
        if (!core.alive(link)) break;
        RxAction a = core.OnFrame(now, link, stream, f);
        if (a.kind == RxAction::kPlace || a.kind == RxAction::kStash || a.kind == RxAction::kDiscard) {
          if (a.len > f.len) std::abort();  // never asks for more than the frame carries
          pa = a;
        }
        break;
      }
      case 3: {  // the payload of the pending header is read in full
        RxAction& pa = pending[link][stream];
        if (pa.kind == RxAction::kNone) break;
        if (pa.dst != nullptr && pa.len > 0) std::memset(pa.dst, 0x5a, pa.len);  // ASan: inside a buffer
        pa = RxAction{};
        if (core.alive(link)) core.OnPayload(now, link, stream);
        break;
      }
      case 4:  // link fails; every payload in flight on it is gone
        core.OnLinkError(now, link, "fuzz", (op & 0x80) != 0);
        for (auto& a : pending[link]) a = RxAction{};
        break;
      case 5: {  // a link (re)connects with some epoch
        uint8_t epoch = in.Byte();
        for (auto& a : pending[link]) a = RxAction{};
        core.OnLinkUp(now, link, epoch % 4, link, kStreams, "fuzz link");
        break;
      }
      case 6: {  // time passes; control frames are drained
        now += (static_cast<uint64_t>(in.Byte()) + 1) * 10'000'000;
        core.Poll(now, (op & 0x80) != 0);
        Frame out;
        for (int l = 0; l < core.links(); ++l) {
          while (core.NextControl(now, l, &out)) {
          }
        }
        break;
      }
      case 7: {  // completions are handed to NCCL and released
        Completion c;
        while (core.NextCompletion(&c)) {
          auto* p = static_cast<Posted*>(c.owner);
          if (c.size > p->buf.size()) std::abort();
          p->done = true;
        }
        while (!posted.empty() && posted.front()->done) {
          // A completed buffer may go only once no pending payload still points into it.
          Posted* p = posted.front().get();
          bool busy = false;
          for (auto& row : pending)
            for (auto& a : row)
              if (a.dst != nullptr && a.dst >= p->buf.data() && a.dst < p->buf.data() + p->buf.size()) busy = true;
          if (busy) break;
          core.Release(p->slot);
          posted.pop_front();
        }
        break;
      }
    }
    // As RecvComm::Sync does after every core call: a link the core dropped on its own (a timer in Poll,
    // a link-down notice, a protocol error) takes its half-read payloads with it, and a stash copy
    // they pointed into may be gone.
    for (int l = 0; l < kLinks; ++l) {
      if (!core.alive(l))
        for (auto& a : pending[l]) a = RxAction{};
    }
  }
  return 0;
}
