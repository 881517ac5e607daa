// rerail-simnet internals: the simulated world of one seed (sim.h describes the model and oracles).
//   world_net.cc      wires, streams, link incarnations, connects, faults (the "kernel" and the fabric)
//   world_drivers.cc  the NCCL-like drivers of each comm's SendCore / RecvCore
//   world_oracles.cc  the oracles and liveness bounds
// Single-threaded; every container is indexed by integers (no pointer keys, no unordered iteration).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <string>
#include <utility>
#include <vector>

#include "sim.h"

namespace rr::sim {

// xoshiro256** seeded by splitmix64: integer-only, the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Next();
  uint64_t Below(uint64_t n) { return n <= 1 ? 0 : Next() % n; }
  uint64_t Range(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }  // inclusive
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  uint64_t LogUniform(uint64_t lo, uint64_t hi);  // lo..hi, uniform in log
 private:
  uint64_t s_[4];
};

uint64_t Mix64(uint64_t x);

namespace detail {

constexpr uint64_t kZeroWindowProbeNs = 200'000'000;  // the first zero-window probe: one RTO (TCP_RTO_MIN)

enum Ev : uint8_t {
  kWireDone,     // a: wire, b: token; the wire finished serializing its current segment
  kArrive,       // a: stream, b: cumulative end: a segment reached the receiving kernel
  kAck,          // a: stream, b: cumulative end, c: window edge: the transport ack reached the writer
  kFin,          // a: stream: the FIN reached the reader (nothing was left in flight)
  kWindowKick,   // a: stream, c: window edge: a window update reached the writer
  kPump,         // a: comm * 2 + side: run the endpoint's driver
  kConnectDone,  // a: comm, b: link << 32 | token: the SYN's answer (or its silence) is known
  kHello,        // a: incarnation: the link's hello reached the listener
  kFaultStart,   // a: fault index
  kFaultEnd,     // a: fault index
  kFlapToggle,   // a: fault index, b: toggle number
  kRailEvent,    // a: host * 64 + rail, b: 1 down / 0 up
  kHeal,         // the chaos phase is over
  kKill,         // a: incarnation, b: 1 when the sender sees ECONNRESET: a closed socket's peer got an RST
  kZeroWindow,   // a: stream, b: token: TCP_USER_TIMEOUT ran out with the window still closed
};

struct Event {
  uint64_t t = 0;
  uint64_t seq = 0;
  uint8_t kind = 0;
  int32_t a = 0;
  uint64_t b = 0;
  uint64_t c = 0;  // kAck / kWindowKick: the reader's position the window update carries
};
struct Later {
  bool operator()(const Event& x, const Event& y) const { return x.t != y.t ? x.t > y.t : x.seq > y.seq; }
};

// A frame in a socket. Its payload is not carried: a data frame's bytes are Pattern(key of message
// hdr.seq, hdr.offset, hdr.len), which CheckTx verified when it was written (an eager frame's bytes
// compared word by word, a non-eager frame's payload pointer equal to the send buffer + offset).
struct FrameRec {
  net::Frame hdr{};
  uint64_t end = 0;            // cumulative stream offset of its last byte + 1
};

// One direction of one socket.
struct Stream {
  int wire = 0;
  int inc = 0;
  int idx = 0;
  bool ctl = false;  // receiver -> sender (control)
  uint64_t written = 0, sent = 0, arrived = 0, acked = 0, read = 0;
  uint64_t known_read = 0;  // the reader's position as the writer last heard it (its window edge)
  bool kick_pending = false;  // a window update is on its way (or held by a black hole)
  std::deque<FrameRec> frames;  // written, not fully read
  bool in_ready = false;   // queued on its wire
  bool win_blocked = false;
  // The writer's time held by a closed window (Linux's tcpi_rwnd_limited): the closed spans so far,
  // and when the current one began (0: open).
  uint64_t rwnd_ns = 0, rwnd_since = 0;
  uint64_t zw_abort_at = 0;  // the writer's kernel aborts then if its window is still closed (0: open)
  uint64_t zw_token = 0;
  bool fin = false;        // the writer closed after `written`
  bool fin_arrived = false;
  bool reset = false;
  bool head_open = false;  // the head frame's header was handled; its payload is awaited
  net::RxAction act;
};

// One incarnation of a comm's link (one connect): S data streams and the control direction.
struct Inc {
  int comm = 0, link = 0, rail = 0;
  uint32_t epoch = 0;
  std::vector<int> fwd;
  int rev = -1;
  bool tx_open = true;   // the sender holds it
  bool rx_open = false;  // the receiver attached it
  bool reset = false;
  bool peer_closed = false;  // the reset came from a dead peer
};

struct Wire {
  uint64_t base_bps = 0, bps = 0, delay = 0;
  uint64_t carry = 0;  // serialization remainder (bits * 1e9 mod bps)
  bool busy = false;
  int cur = -1;        // stream being serialized
  uint64_t cur_end = 0;
  uint64_t cur_start = 0, cur_done = 0, cur_bytes = 0;
  uint64_t token = 0;  // the pending kWireDone's (a rate change reschedules it)
  std::deque<int> ready;
  int dead = 0;        // overlapping faults that black-hole it
  std::vector<Event> held;  // arrivals / acks swallowed while dead: replayed in order on heal
};

// The payload of every message is a function of (key, offset): byte p is byte p % 8 of the 64-bit
// word PatternWord(key, p - p % 8) as stored in memory. Every 8-byte word of every message differs,
// so bytes from another offset or another message never pass for the right ones, and no buffer has
// to be filled, hashed or carried to be checked.
inline uint64_t PatternWord(uint64_t key, uint64_t aligned) { return key ^ ((aligned + 8) * 0x9e3779b97f4a7c15ull); }
// Writes bytes [off, off + len) of the message with `key` to out.
void Pattern(uint8_t* out, uint64_t key, uint64_t off, size_t len);
// The index of the first byte of p[0, len) that differs from bytes [off, off + len) of the message; len if none.
size_t PatternMismatch(const uint8_t* p, uint64_t key, uint64_t off, size_t len);
// The bytes of a chunk [off, off + len) a placement on the wire writes and a completion checks: the
// first and last 8 bytes (the chunk's boundaries) and kChunkSamples 8-byte words at positions drawn
// from (key, off). fn(start, n) is called for each (they may overlap).
constexpr int kChunkSamples = 4;
template <typename Fn>
void ChunkSamples(uint64_t key, uint64_t off, uint64_t len, Fn fn) {
  if (len <= 16 + 8 * kChunkSamples) return fn(off, len);
  fn(off, 8);
  fn(off + len - 8, 8);
  for (int i = 0; i < kChunkSamples; ++i) fn(off + 8 + Mix64(key ^ (off * 0x100 + i)) % (len - 23), 8);
}

// The same over every granule (wire.h: ChunkGranule) of [off, off + len), which starts on the grid:
// a message's bytes are written and checked per granule, whatever chunks carried them.
template <typename Fn>
void GranuleSamples(uint64_t key, uint64_t off, uint64_t len, uint64_t granule, Fn fn) {
  if (len == 0) return;
  for (uint64_t at = off; at < off + len; at += granule) ChunkSamples(key, at, std::min(granule, off + len - at), fn);
}

struct Msg {
  uint64_t size = 0, cap = 0;
  // Copy mode: real send and receive buffers. The send buffer is never read or written by the
  // simulator (the core reads it only through its copier, which writes the pattern); the receive
  // buffer gets sampled bytes of every chunk placed from the wire, every byte of a chunk the core
  // copies from its stash, and guard bytes beyond the message.
  std::unique_ptr<uint8_t[]> src, dst;
  uint8_t* src_p = nullptr;
  uint8_t* dst_p = nullptr;
  uint64_t key = 0;  // the payload (Pattern)
  std::vector<uint8_t> placed;  // per granule (wire.h: ChunkGranule): times placed
  std::vector<uint8_t> handed;  // per granule: times the sender handed it to a link (placed <= handed)
  uint64_t chunks_placed = 0;   // granules placed at least once
  bool zero_read = false;
  bool eager = false;
  uint64_t written_payload = 0;
  void* slot = nullptr;
  bool s_posted = false, r_posted = false, s_done = false, r_done = false;  // done: as NCCL sees it
  bool s_core_done = false, r_core_done = false;                            // the core reported it
  uint64_t t_post_s = 0, t_post_r = 0, t_start = 0, t_done = 0;
  uint64_t ahead = 0;
};

struct TxDrv {
  int inc = -1;
  uint64_t token = 0;
  bool connecting = false;
  uint32_t epoch = 0;
  int syn = 0;
  int result = 0;  // 0 pending, 1 connected (new_inc), 2 failed (why)
  int new_inc = -1;
  std::string why;
};

class Observer;

// rerail-perf's Engine on one host (sim.h: EngineSpec): where its stream is.
struct Engine {
  size_t pos = 0;             // next primitive
  uint64_t filled = 0;        // slices of send_comm the stream filled (isend may post them)
  uint64_t consumed = 0;      // slices of recv_comm the stream consumed (their slots may be re-posted)
  uint64_t iters_done = 0;    // iteration boundaries reached with every send completed
};

// Request cookies given to the cores: the message index + 1.
inline void* Owner(size_t k) { return reinterpret_cast<void*>(static_cast<uintptr_t>(k + 1)); }
inline size_t FromOwner(void* p) { return static_cast<size_t>(reinterpret_cast<uintptr_t>(p)) - 1; }
inline bool Delivered(const Msg& m) { return m.size == 0 ? m.zero_read : m.chunks_placed == m.placed.size(); }
constexpr uint8_t kGuard = 0xee;  // receive-buffer bytes beyond the message
constexpr uint64_t kFrameBytes = sizeof(net::Frame);

// One NCCL comm pair: the SendCore on host `from`, the RecvCore on the other, and their drivers.
struct Comm {
  CommSpec spec;
  int id = 0;
  int eng[2] = {-1, -1};  // the engine that fills its sends / consumes its receives (-1: window only)
  std::unique_ptr<Observer> obs[2];
  std::unique_ptr<net::SendCore> send;
  std::unique_ptr<net::RecvCore> recv;
  std::vector<TxDrv> tx;               // per link: the sender's transport objects
  std::vector<int> rx;                 // per link: the incarnation the receiver attached (-1)
  std::deque<int> attach;              // incarnations whose hello arrived, not attached yet
  std::deque<std::pair<int, bool>> rail_ev[2];  // rail events not yet seen by each side
  std::vector<Msg> msgs;
  size_t s_post = 0, s_test = 0, r_post = 0, r_test = 0;
  bool ready = false;
  uint64_t pause_until[2] = {0, 0};
  uint64_t pump_at[2] = {UINT64_MAX, UINT64_MAX};
  bool failed[2] = {false, false};
  uint64_t failed_at[2] = {0, 0};
  bool dead[2] = {false, false};
  uint64_t spins[2] = {0, 0};
  uint64_t spin_t[2] = {0, 0};
  std::vector<net::LinkSample> samples;
};

}  // namespace detail

class World {
 public:
  World(const Scenario& sc, bool verbose);
  ~World();
  Result Go();

  // ---- used by the drivers (world_drivers.cc) and the network (world_net.cc)
  void Push(uint64_t t, uint8_t kind, int32_t a, uint64_t b = 0, uint64_t c = 0);
  void Violate(const std::string& what);
  bool violated() const { return !res_.ok; }
  void Trace(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

 private:
  friend class detail::Observer;
  // network (world_net.cc)
  int NewStream(int wire, int inc, int idx, bool ctl);
  int NewInc(int comm, int link, uint32_t epoch);
  uint64_t SerNs(detail::Wire& w, uint64_t bytes);
  uint64_t DeadWireRound() const;
  uint64_t RwndNs(const detail::Stream& s) const { return s.rwnd_ns + (s.rwnd_since != 0 ? now_ - s.rwnd_since : 0); }
  // The window the reader's kernel last advertised, as the writer knows it (tcpi_snd_wnd): its buffer
  // less the bytes it acknowledged and its application had not read yet.
  uint64_t PeerWindow(const detail::Stream& s) const {
    return s.known_read + sc_.rcvbuf > s.acked ? s.known_read + sc_.rcvbuf - s.acked : 0;
  }
  void WireKick(int w);
  uint64_t ZeroWindowLimit() const;
  void WireDone(int w, uint64_t token);
  void SetRate(int w, uint64_t bps);
  void Serialise(int w, uint64_t bytes);
  bool CanTake(int sid) const;
  void Write(int sid, const net::Frame& hdr);  // the payload is implied by the header (FrameRec)
  void SetFin(int sid);
  void OnArrive(const detail::Event& e);
  void OnAck(const detail::Event& e);
  void Hold(int wire, const detail::Event& e);
  void Dead(int wire, int delta);
  void ResetInc(int inc, bool peer_closed);
  void CloseTx(int inc, const net::Frame* notice);
  void CloseRx(int inc, const net::Frame* notice);
  void Connect(int comm, int link, uint32_t epoch);
  void ConnectDone(int comm, int link, uint64_t token);
  void RailEvent(int host, int rail, bool down);
  void FaultStart(int f);
  void FaultEnd(int f);
  void FlapToggle(int f, uint64_t n);
  void KillHost(int host);
  void Dump();
  int WireOf(int rail, int from) const { return rail * 2 + from; }

  // drivers and oracles (world_drivers.cc)
  void Wake(int comm, int side, uint64_t t);
  void Pump(int comm, int side);
  bool NcclDrives(const detail::Comm& c, int side) const;  // NCCL has a request on it, or one to post
  bool IdleSendsDrive(const detail::Comm& c, int side) const;  // Comm::OwesIdleProgress
  void PumpSend(detail::Comm& c);
  bool SendSetup(detail::Comm& c);
  bool SendWrites(detail::Comm& c);
  void SendReadControl(detail::Comm& c);
  void DebugState(const detail::Comm& c);
  void PumpRecv(detail::Comm& c);
  void RecvAttach(detail::Comm& c);
  static constexpr size_t kNoWant = SIZE_MAX;
  bool RecvReads(detail::Comm& c, size_t want, bool* read_any);
  void Commands(detail::Comm& c);
  void SyncRecv(detail::Comm& c);
  bool ReadStream(detail::Comm& c, int link, int sid);
  void CheckTx(detail::Comm& c, int link, const net::TxFrame& f);
  void Place(detail::Comm& c, const net::Frame& hdr, const uint8_t* dst, const uint8_t* bytes, bool stash_copy);
  bool OnGrid(const detail::Msg& m, const net::Frame& h) const;
  std::pair<uint64_t, uint64_t> Granules(const net::Frame& h) const;
  void DrainSend(detail::Comm& c);
  void DrainRecv(detail::Comm& c);
  void Finish(detail::Comm& c, detail::Msg& m, size_t k);
  void Failed(detail::Comm& c, int side);
  void MaybePost(detail::Comm& c, int side);
  void EngineStep(int host);
  double RateFloor(uint64_t t0, uint64_t t1) const;
  uint64_t Bound(const detail::Comm& c, const detail::Msg& m, uint64_t t_end) const;
  void CheckBounds(bool final);
  bool AllDone() const;
  void OnHeal();
  uint64_t Recover() const;

  Scenario sc_;
  bool verbose_;
  int debug_ = 0;
  Result res_;
  uint64_t now_ = 0;
  uint64_t seq_ = 0;
  std::priority_queue<detail::Event, std::vector<detail::Event>, detail::Later> q_;
  Rng perturb_;
  std::vector<detail::Wire> wires_;
  std::vector<detail::Stream> streams_;
  std::vector<detail::Inc> incs_;
  std::unique_ptr<net::RailLoad[]> loads_[2];  // before comms_: a SendCore's destructor updates its rails
  std::vector<std::unique_ptr<detail::Comm>> comms_;
  std::vector<detail::Engine> engines_;  // sc_.engines' state
  int host_rail_down_[2][net::kMaxRails] = {};
  bool host_dead_[2] = {false, false};
  std::vector<uint64_t> fault_times_;    // starts, ends and flap toggles of rail faults
  std::vector<uint64_t> flap_prev_;      // per fault: last toggle state
  uint64_t limit_ = kForever;           // the run must be over by then
  uint64_t user_timeout_ns_ = 0;        // TCP_USER_TIMEOUT as the plugin sets it: max(30 s, give-up)
  uint64_t rtt_max_ = 0;
  uint64_t rate_min_ = UINT64_MAX;
  int ndir_[2] = {0, 0};                // comms per direction
  uint64_t outstanding_[2] = {0, 0};    // bytes posted by senders and not yet received, per direction
  uint64_t bench_t0_ = 0, bench_bytes0_ = 0;
  uint64_t wire_bytes_ = 0;  // data-stream bytes (headers included) that reached a receiving kernel
  bool bench_over_ = false;
};

}  // namespace rr::sim
