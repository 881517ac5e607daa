#include "plan.h"

#include <algorithm>
#include <tuple>

namespace rr::perf {

bool ConnKey::operator<(const ConnKey& o) const {
  return std::tie(p2p, send, peer, channel) < std::tie(o.p2p, o.send, o.peer, o.channel);
}
bool ConnKey::operator==(const ConnKey& o) const {
  return p2p == o.p2p && send == o.send && peer == o.peer && channel == o.channel;
}

double BusBwFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll: return static_cast<double>(n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kSendRecv: return 1.0;
  }
  return 1.0;
}

std::vector<ConnKey> ConnsFor(Coll c, int n, int me, int channels) {
  std::vector<ConnKey> keys;
  if (n < 2) return keys;
  int next = (me + 1) % n, prev = (me + n - 1) % n;
  for (int ch = 0; ch < channels; ++ch) {
    if (c == Coll::kAllToAll) {
      for (int p = 0; p < n; ++p)
        if (p != me) keys.push_back({true, true, p, ch}), keys.push_back({true, false, p, ch});
    } else {
      bool p2p = (c == Coll::kSendRecv);
      keys.push_back({p2p, true, next, ch});
      keys.push_back({p2p, false, prev, ch});
    }
  }
  return keys;
}

namespace {

size_t DivUp(size_t a, size_t b) { return (a + b - 1) / b; }
size_t AlignUp(size_t a, size_t b) { return DivUp(a, b) * b; }

class Builder {
 public:
  Builder(Plan* plan, const PlanArgs& a) : p_(plan), a_(a) {}

  int Conn(bool p2p, bool send, int peer, int ch) {
    ConnKey k{p2p, send, peer, ch};
    for (size_t i = 0; i < p_->conns.size(); ++i)
      if (p_->conns[i] == k) return static_cast<int>(i);
    p_->conns.push_back(k);
    p_->conn_slices.push_back(0);
    return static_cast<int>(p_->conns.size()) - 1;
  }
  Stream& NewStream(int send_conn, int recv_conn) {
    p_->streams.emplace_back();
    p_->streams.back().send_conn = send_conn;
    p_->streams.back().recv_conn = recv_conn;
    return p_->streams.back();
  }
  // Cuts one primitive over `nelem` elements (possibly 0) into slices.
  void Emit(int stream, ElemOp op, size_t src_el, size_t dst_el, size_t nelem, size_t slice_bytes) {
    Stream& s = p_->streams[stream];
    size_t ts = a_.type_size, bytes = nelem * ts;
    size_t n = std::max<size_t>(1, DivUp(bytes, slice_bytes));
    for (size_t i = 0; i < n; ++i) {
      size_t off = i * slice_bytes, b = std::min(slice_bytes, bytes - off);
      s.elems.push_back({op, src_el * ts + off, dst_el * ts + off, b});
      if (NeedsSend(op)) ++p_->conn_slices[s.send_conn];
      if (NeedsRecv(op)) ++p_->conn_slices[s.recv_conn];
    }
  }
  int Next() const { return (a_.rank + 1) % a_.nranks; }
  int Prev() const { return (a_.rank + a_.nranks - 1) % a_.nranks; }
  int Mod(int x) const { return ((x % a_.nranks) + a_.nranks) % a_.nranks; }
  int RingStream(int ch, bool with_send = true, bool with_recv = true) {
    int sc = with_send ? Conn(false, true, Next(), ch) : -1;
    int rc = with_recv ? Conn(false, false, Prev(), ch) : -1;
    NewStream(sc, rc);
    return static_cast<int>(p_->streams.size()) - 1;
  }

  void AllReduce(size_t count);
  void AllGather(size_t cnt);
  void ReduceScatter(size_t cnt);
  void Broadcast(size_t count);
  void P2p(size_t cnt, bool alltoall);

 private:
  Plan* p_;
  const PlanArgs& a_;
};

constexpr size_t kRingSlice = 2 * kRingStepBytes, kRingChunk = 4 * kRingStepBytes;

void Builder::AllReduce(size_t count) {
  const size_t n = a_.nranks, nch = a_.channels, chunk = kRingChunk / a_.type_size;
  std::vector<int> st;
  for (int ch = 0; ch < a_.channels; ++ch) st.push_back(RingStream(ch));
  for (size_t grid = 0; grid < count; grid += nch * n * chunk) {
    size_t real = std::min(chunk, AlignUp(DivUp(count - grid, nch * n), 16));
    for (int ch = 0; ch < a_.channels; ++ch) {
      auto off = [&](int c) { return grid + (ch * n + static_cast<size_t>(c)) * real; };
      auto nel = [&](int c) { return off(c) >= count ? 0 : std::min(real, count - off(c)); };
      int me = a_.rank, c = Mod(me - 1);
      Emit(st[ch], ElemOp::kSend, off(c), 0, nel(c), kRingSlice);
      for (int j = 2; j < a_.nranks; ++j) c = Mod(me - j), Emit(st[ch], ElemOp::kRecvReduceSend, off(c), 0, nel(c), kRingSlice);
      Emit(st[ch], ElemOp::kRecvReduceCopySend, off(me), off(me), nel(me), kRingSlice);
      for (int j = 1; j < a_.nranks - 1; ++j) c = Mod(me - j), Emit(st[ch], ElemOp::kRecvCopySend, 0, off(c), nel(c), kRingSlice);
      c = Mod(me + 1);
      Emit(st[ch], ElemOp::kRecv, 0, off(c), nel(c), kRingSlice);
    }
  }
}

void Builder::AllGather(size_t cnt) {
  const size_t nch = a_.channels, chunk = kRingChunk / a_.type_size;
  std::vector<int> st;
  for (int ch = 0; ch < a_.channels; ++ch) st.push_back(RingStream(ch));
  for (size_t grid = 0; grid < cnt; grid += nch * chunk) {
    size_t real = std::min(chunk, AlignUp(DivUp(cnt - grid, nch), 16));
    for (int ch = 0; ch < a_.channels; ++ch) {
      size_t off = grid + ch * real, nel = off >= cnt ? 0 : std::min(real, cnt - off);
      int me = a_.rank;
      Emit(st[ch], ElemOp::kCopySend, off, me * cnt + off, nel, kRingSlice);
      for (int j = 1; j < a_.nranks - 1; ++j)
        Emit(st[ch], ElemOp::kRecvCopySend, 0, Mod(me - j) * cnt + off, nel, kRingSlice);
      Emit(st[ch], ElemOp::kRecv, 0, Mod(me + 1) * cnt + off, nel, kRingSlice);
    }
  }
}

void Builder::ReduceScatter(size_t cnt) {
  const size_t nch = a_.channels, chunk = kRingChunk / a_.type_size;
  std::vector<int> st;
  for (int ch = 0; ch < a_.channels; ++ch) st.push_back(RingStream(ch));
  for (size_t grid = 0; grid < cnt; grid += nch * chunk) {
    size_t real = std::min(chunk, AlignUp(DivUp(cnt - grid, nch), 16));
    for (int ch = 0; ch < a_.channels; ++ch) {
      size_t off = grid + ch * real, nel = off >= cnt ? 0 : std::min(real, cnt - off);
      int me = a_.rank;
      Emit(st[ch], ElemOp::kSend, Mod(me - 1) * cnt + off, 0, nel, kRingSlice);
      for (int j = 2; j < a_.nranks; ++j)
        Emit(st[ch], ElemOp::kRecvReduceSend, Mod(me - j) * cnt + off, 0, nel, kRingSlice);
      Emit(st[ch], ElemOp::kRecvReduceCopy, me * cnt + off, off, nel, kRingSlice);
    }
  }
}

void Builder::Broadcast(size_t count) {
  const size_t nch = a_.channels, chunk = kRingStepBytes / a_.type_size;
  int pos = Mod(a_.rank - a_.root);
  bool first = pos == 0, last = pos == a_.nranks - 1;
  std::vector<int> st;
  for (int ch = 0; ch < a_.channels; ++ch) st.push_back(RingStream(ch, !last, !first));
  for (size_t grid = 0; grid < count; grid += nch * chunk) {
    size_t real = std::min(chunk, AlignUp(DivUp(count - grid, nch), 16));
    for (int ch = 0; ch < a_.channels; ++ch) {
      size_t off = grid + ch * real, nel = off >= count ? 0 : std::min(real, count - off);
      ElemOp op = first ? ElemOp::kCopySend : (last ? ElemOp::kRecv : ElemOp::kRecvCopySend);
      Emit(st[ch], op, off, off, nel, kRingStepBytes);
    }
  }
}

// sendrecv: to next / from prev. alltoall: block p of the input to rank p, block p of the output
// from rank p. Each (peer, channel) pair carries 1/channels of the block.
void Builder::P2p(size_t cnt, bool alltoall) {
  const size_t per = DivUp(cnt, static_cast<size_t>(a_.channels));
  for (int p = 0; p < a_.nranks; ++p) {
    if (!alltoall && p != Next()) continue;
    if (alltoall && p == a_.rank) {
      NewStream(-1, -1);
      Emit(static_cast<int>(p_->streams.size()) - 1, ElemOp::kCopy, p * cnt, p * cnt, cnt, cnt * a_.type_size + 1);
      continue;
    }
    int from = alltoall ? p : Prev();
    size_t blk = alltoall ? static_cast<size_t>(p) * cnt : 0;
    for (int ch = 0; ch < a_.channels; ++ch) {
      size_t off = ch * per, nel = off >= cnt ? 0 : std::min(per, cnt - off);
      int s = static_cast<int>(p_->streams.size());
      NewStream(Conn(true, true, p, ch), -1);
      Emit(s, ElemOp::kSend, blk + off, 0, nel, kP2pStepBytes);
      NewStream(-1, Conn(true, false, from, ch)).gate = a_.in_place ? s : -1;
      Emit(s + 1, ElemOp::kRecv, 0, blk + off, nel, kP2pStepBytes);
    }
  }
}

}  // namespace

Plan BuildPlan(const PlanArgs& a) {
  Plan p;
  p.coll = a.coll;
  p.in_place = a.in_place;
  p.size_bytes = a.size_bytes;
  const size_t ts = a.type_size, n = static_cast<size_t>(a.nranks);
  const size_t total = a.size_bytes / ts;  // elements
  bool per_rank = a.coll == Coll::kAllGather || a.coll == Coll::kReduceScatter || a.coll == Coll::kAllToAll;
  p.count = per_rank ? total / n : total;
  size_t whole = per_rank ? p.count * n : p.count;  // elements in the big buffer
  p.size_bytes = whole * ts;
  p.in_bytes = p.out_bytes = whole * ts;
  if (a.coll == Coll::kAllGather) p.in_bytes = p.count * ts, p.in_offset = a.rank * p.count * ts;
  if (a.coll == Coll::kReduceScatter) p.out_bytes = p.count * ts, p.out_offset = a.rank * p.count * ts;
  if (!a.in_place) p.in_offset = p.out_offset = 0;
  p.slice_steps = (a.coll == Coll::kAllReduce || a.coll == Coll::kAllGather || a.coll == Coll::kReduceScatter) ? 2 : 1;
  Builder b(&p, a);
  if (a.nranks == 1) {
    b.NewStream(-1, -1);
    b.Emit(0, ElemOp::kCopy, 0, 0, p.count, p.count * ts + 1);
    return p;
  }
  switch (a.coll) {
    case Coll::kAllReduce: b.AllReduce(p.count); break;
    case Coll::kAllGather: b.AllGather(p.count); break;
    case Coll::kReduceScatter: b.ReduceScatter(p.count); break;
    case Coll::kBroadcast: b.Broadcast(p.count); break;
    case Coll::kSendRecv: b.P2p(p.count, false); break;
    case Coll::kAllToAll: b.P2p(p.count, true); break;
  }
  return p;
}

}  // namespace rr::perf
