// Rootless all-gather (rerail/boot/exchange.h): Bruck dissemination over non-blocking sockets,
// driven by one poll loop per rank that both pulls from peers and serves its own pullers.
#include "rerail/boot/exchange.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "exchange_wire.h"
#include "rerail/auth.h"
#include "rerail/clock.h"
#include "rerail/log.h"

namespace rr::boot {

using wire::Kind;
using wire::Reply;

namespace {

constexpr uint64_t kBackoffMinMs = 2, kBackoffMaxMs = 50;  // a refused connect costs a SYN and a RST

// Client side: the one request this rank has in flight.
enum class ClientState {
  kIdle,        // nothing in flight: pick the next pull, or the next bye once complete
  kBackoff,     // last attempt failed; wait until retry_at_ns before reconnecting
  kConnecting,  // non-blocking connect started, waiting for POLLOUT
  kSending,     // connected; writing the request
  kReceiving,   // request sent; reading the response header and blobs
  kFinished,    // every pull and every bye is done
};

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* StateName(ClientState s) {
  switch (s) {
    case ClientState::kIdle: return "idle";
    case ClientState::kBackoff: return "backoff";
    case ClientState::kConnecting: return "connecting";
    case ClientState::kSending: return "sending";
    case ClientState::kReceiving: return "receiving";
    case ClientState::kFinished: return "finished";
  }
  return "?";
}

// Server side: one accepted connection; may carry several requests (a pull, later a bye).
struct InConn {
  int fd = -1;
  char req[sizeof(wire::Request)];
  size_t have = 0;
  bool parked = false;   // a pull waiting until this rank holds enough blobs
  std::string out;
  size_t off = 0;
  bool close_after_write = false;
};

}  // namespace

class Exchange::Impl {
 public:
  Impl(const Job& job, ExchangeOptions opts) : job_(job), opts_(std::move(opts)) {}
  ~Impl() { Shutdown(); }

  Status Init();
  Status Wait(std::vector<std::string>* blobs);
  void Close();
  ExchangeStats Stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stats_;
  }
  void Shutdown();

 private:
  void NextPull();
  void Loop();
  void Transition(ClientState to, const char* why);
  void ClientProgress(short revents);
  void StartRequest();
  void RequestFailed(const std::string& why);
  Status CheckHeader(size_t* total);
  void StepDone();
  void ServeAccept();
  bool ServeConn(InConn* c, short revents);  // false: drop the connection
  void HandleRequest(InConn* c);
  void TryAnswer(InConn* c);
  void Finish(Status s);
  bool ShouldExit();

  Job job_;
  ExchangeOptions opts_;
  int n_ = 0, rank_ = 0;
  size_t blob_ = 0;
  uint64_t magic_ = 0;
  wire::Shape shape_{};  // what every request and response must match
  std::string table_;  // n_ * blob_ bytes, blob i at i * blob_
  int held_ = 1;       // this rank holds blobs rank_ .. rank_ + held_ - 1 (mod n_)
  int listen_fd_ = -1, wake_fd_ = -1;
  std::vector<InConn> in_;
  std::set<int> byes_expected_, byes_got_;
  std::map<int, int> kept_;   // peer -> connection of the last pull from it (reused, then for the bye)
  std::vector<int> servers_;  // peers pulled from, in order: each gets a bye

  // Client state (exchange thread only).
  ClientState state_ = ClientState::kIdle;
  int step_ = 0;        // pulls completed
  size_t bye_idx_ = 0;  // next servers_ entry to say bye to
  bool bye_phase_ = false;
  uint32_t cur_first_ = 0, cur_count_ = 0, cur_min_ = 0, cur_got_ = 0;
  int cfd_ = -1;
  SockAddr peer_addr_;
  int peer_ = -1;
  std::string creq_;
  size_t coff_ = 0;
  std::string cbuf_;
  size_t chave_ = 0;
  uint64_t backoff_ms_ = kBackoffMinMs, retry_at_ns_ = 0;
  std::string last_reason_;
  uint64_t start_ns_ = 0, deadline_ns_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;          // under mu_: pulls finished (ok or failed)
  Status result_;              // under mu_
  bool close_requested_ = false;  // under mu_
  uint64_t linger_until_ns_ = 0;  // under mu_
  ExchangeStats stats_;        // under mu_
  std::thread thread_;
};

Status Exchange::Impl::Init() {
  n_ = job_.nranks();
  rank_ = opts_.rank;
  blob_ = opts_.blob.size();
  if (rank_ < 0 || rank_ >= n_)
    return Status::InvalidArg("exchange rank " + std::to_string(rank_) + " is outside 0.." + std::to_string(n_ - 1));
  if (blob_ == 0 || blob_ > wire::kMaxBlob)
    return Status::InvalidArg("exchange blob of " + std::to_string(blob_) + " bytes (must be 1.." +
                              std::to_string(wire::kMaxBlob) + ")");
  if (opts_.algorithm != ExchangeAlgorithm::kBruck && opts_.algorithm != ExchangeAlgorithm::kRing)
    return Status::InvalidArg("unknown exchange algorithm " + std::to_string(static_cast<int>(opts_.algorithm)));
  magic_ = job_.Magic(opts_.group);
  if (!auth::JobSecret().empty()) {
    // RERAIL_JOB_SECRET: the magic becomes a keyed one (first 8 bytes of HMAC-SHA256(secret, magic)), so a
    // process without the secret - another job, a port scanner - cannot produce an accepted request.
    auth::Tag t{};
    if (!auth::Hmac(auth::JobSecret(), "rerail-boot-magic-v1", &magic_, sizeof(magic_), &t))
      return Status::Internal("bootstrap exchange: HMAC of the job secret failed");
    std::memcpy(&magic_, t.data(), sizeof(magic_));
  }
  shape_ = wire::Shape{magic_, static_cast<uint32_t>(n_), static_cast<uint32_t>(blob_),
                       static_cast<uint32_t>(opts_.algorithm)};
  table_.assign(static_cast<size_t>(n_) * blob_, '\0');
  std::memcpy(&table_[static_cast<size_t>(rank_) * blob_], opts_.blob.data(), blob_);
  if (opts_.algorithm == ExchangeAlgorithm::kRing) {
    if (n_ > 1) byes_expected_.insert((rank_ + n_ - 1) % n_);
  } else {
    for (int d = 1; d < n_; d *= 2) byes_expected_.insert((rank_ - d + n_) % n_);
  }
  RR_CHECK(wire::Listen(job_.Address(rank_, opts_.group), &listen_fd_));
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  RR_SYSCHECK(wake_fd_, "eventfd");
  start_ns_ = NowNs();
  deadline_ns_ = start_ns_ + opts_.timeout_ms * 1000000ull;
  if (n_ == 1) Finish(Status::Ok());
  thread_ = std::thread([this] {
    try {  // nothing escapes the thread: an exception fails the exchange instead of the process
      Loop();
    } catch (const std::exception& e) {
      Finish(Status::Internal(std::string("exchange thread: ") + e.what()));
    } catch (...) {
      Finish(Status::Internal("exchange thread: unknown exception"));
    }
  });
  return Status::Ok();
}

// Allowed client transitions, indexed [from][to] in ClientState order.
constexpr bool kAllowed[6][6] = {
    //            idle   backoff connecting sending receiving finished
    /* idle */ {false, true, true, true, false, true},
    /* backoff */ {false, true, true, true, false, false},
    /* connecting */ {false, true, false, true, false, false},
    /* sending */ {false, true, false, false, true, false},
    /* receiving */ {true, true, false, false, false, false},
    /* finished */ {false, false, false, false, false, false},
};

void Exchange::Impl::Transition(ClientState to, const char* why) {
  if (!kAllowed[static_cast<int>(state_)][static_cast<int>(to)])
    RR_WARN("bootstrap exchange g%llu r%d: unexpected transition %s -> %s (%s)",
            static_cast<unsigned long long>(opts_.group), rank_, StateName(state_), StateName(to), why);
  RR_TRACE(log::kFlagBootstrap, "exchange g%llu r%d: %s -> %s (%s)", static_cast<unsigned long long>(opts_.group),
           rank_, StateName(state_), StateName(to), why);
  state_ = to;
}

void Exchange::Impl::Finish(Status s) {
  std::lock_guard<std::mutex> lk(mu_);
  if (done_) return;
  done_ = true;
  result_ = std::move(s);
  stats_.wait_ms = static_cast<double>(NowNs() - start_ns_) / 1e6;
  cv_.notify_all();
}

// Both algorithms pull the next missing block, rank + held; they differ in whom they ask.
void Exchange::Impl::NextPull() {
  cur_first_ = static_cast<uint32_t>((rank_ + held_) % n_);
  if (opts_.algorithm == ExchangeAlgorithm::kBruck) {
    peer_ = static_cast<int>(cur_first_);  // rank + 2^k holds 2^k blocks from itself on
    cur_count_ = cur_min_ = static_cast<uint32_t>(std::min(held_, n_ - held_));
  } else {
    peer_ = (rank_ + 1) % n_;  // the ring successor streams whatever it has beyond us
    cur_count_ = static_cast<uint32_t>(n_ - held_);
    cur_min_ = 1;
  }
}

void Exchange::Impl::StartRequest() {
  if (!bye_phase_ && held_ >= n_) {
    bye_phase_ = true;
    Finish(Status::Ok());
    RR_INFO(log::kFlagBootstrap | log::kFlagInit, "bootstrap exchange group %llu rank %d: %d blobs in %.1f ms",
            static_cast<unsigned long long>(opts_.group), rank_, n_, Stats().wait_ms);
  }
  if (bye_phase_ && bye_idx_ >= servers_.size()) {
    Transition(ClientState::kFinished, "all byes sent");
    return;
  }
  if (bye_phase_) peer_ = servers_[bye_idx_];
  else NextPull();
  peer_addr_ = job_.Address(peer_, opts_.group);
  wire::Request r{magic_, static_cast<uint32_t>(bye_phase_ ? Kind::kBye : Kind::kPull), static_cast<uint32_t>(rank_),
                  static_cast<uint32_t>(n_), static_cast<uint32_t>(blob_), static_cast<uint32_t>(opts_.algorithm),
                  cur_first_, bye_phase_ ? 0u : cur_count_, bye_phase_ ? 0u : cur_min_};
  creq_.assign(reinterpret_cast<const char*>(&r), sizeof(r));
  coff_ = chave_ = 0;
  cbuf_.assign(sizeof(wire::Response), '\0');
  auto kept = kept_.find(peer_);
  if (kept != kept_.end()) {  // the previous pull's connection carries the next request
    cfd_ = kept->second;
    kept_.erase(kept);
    Transition(ClientState::kSending, "reuse connection");
    return;
  }
  Status s = wire::ConnectStart(peer_addr_, &cfd_);
  if (!s.ok()) return RequestFailed(s.message());
  Transition(ClientState::kConnecting, "connect");
}

void Exchange::Impl::RequestFailed(const std::string& why) {
  if (cfd_ >= 0) close(cfd_);
  cfd_ = -1;
  last_reason_ = why;
  {
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.retries;
  }
  retry_at_ns_ = NowNs() + backoff_ms_ * 1000000ull;
  backoff_ms_ = std::min(backoff_ms_ * 2, kBackoffMaxMs);
  Transition(ClientState::kBackoff, why.c_str());
}

Status Exchange::Impl::CheckHeader(size_t* total) {
  wire::Response h;
  std::memcpy(&h, cbuf_.data(), sizeof(h));
  const wire::Expect e{bye_phase_, cur_first_, cur_min_, cur_count_};
  uint32_t blocks = 0;
  const std::string who = "rank " + std::to_string(peer_) + " at " + peer_addr_.ToString();
  switch (wire::CheckResponse(h, shape_, e, &blocks)) {
    case wire::Verdict::kOk: break;
    case wire::Verdict::kBadMagic:
      return Status::Remote(who + " answered with magic " + Hex(h.magic) + ", expected " + Hex(magic_) +
                            ": a process of another job or group holds the planned port");
    case wire::Verdict::kRefused:
      return Status::Remote(who + " refused the request (" +
                            (h.reply == static_cast<uint32_t>(Reply::kBadMagic) ? "wrong magic"
                                                                                 : "nranks/blob size/step mismatch") + ")");
    case wire::Verdict::kMalformed: return Status::Remote(who + " sent a malformed response");
  }
  *total = sizeof(h) + static_cast<size_t>(blocks) * blob_;
  cur_got_ = blocks;
  return Status::Ok();
}

void Exchange::Impl::StepDone() {
  backoff_ms_ = kBackoffMinMs;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stats_.bytes_in += chave_;
  }
  if (bye_phase_) {
    close(cfd_);
    ++bye_idx_;
  } else {
    for (uint32_t i = 0; i < cur_got_; ++i) {
      size_t dst = static_cast<size_t>((cur_first_ + i) % static_cast<uint32_t>(n_)) * blob_;
      std::memcpy(&table_[dst], cbuf_.data() + sizeof(wire::Response) + static_cast<size_t>(i) * blob_, blob_);
    }
    kept_[peer_] = cfd_;
    if (std::find(servers_.begin(), servers_.end(), peer_) == servers_.end()) servers_.push_back(peer_);
    held_ = std::min(held_ + static_cast<int>(cur_got_), n_);
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.steps = step_ + 1;
    }
    if (opts_.on_step) opts_.on_step(step_);
    ++step_;
  }
  cfd_ = -1;
  Transition(ClientState::kIdle, bye_phase_ ? "bye acknowledged" : "step complete");
}

void Exchange::Impl::ClientProgress(short revents) {
  if (state_ == ClientState::kConnecting && (revents & (POLLOUT | POLLERR | POLLHUP))) {
    Status s = wire::ConnectFinish(cfd_, peer_addr_);
    if (!s.ok()) return RequestFailed(s.message());
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++stats_.connects;
      if (!bye_phase_) stats_.peers_out.push_back(peer_);
    }
    Transition(ClientState::kSending, "connected");
  }
  if (state_ == ClientState::kSending) {
    Status s = wire::WriteSome(cfd_, creq_, &coff_);
    if (!s.ok()) return RequestFailed(s.message());
    if (coff_ < creq_.size()) return;
    Transition(ClientState::kReceiving, "request sent");
  }
  if (state_ != ClientState::kReceiving || !(revents & (POLLIN | POLLERR | POLLHUP))) return;
  bool eof = false;
  size_t total = sizeof(wire::Response);
  Status s = wire::ReadSome(cfd_, &cbuf_[0], total, &chave_, &eof);
  if (s.ok() && chave_ >= sizeof(wire::Response)) {
    s = CheckHeader(&total);
    if (s.ok() && cbuf_.size() < total) cbuf_.resize(total);
    if (s.ok() && chave_ < total) s = wire::ReadSome(cfd_, &cbuf_[0], total, &chave_, &eof);
  }
  if (!s.ok()) return RequestFailed(s.message());
  if (chave_ >= total) return StepDone();
  if (eof) RequestFailed("rank " + std::to_string(peer_) + " at " + peer_addr_.ToString() +
                         " closed the connection (restarting?)");
}

void Exchange::Impl::ServeAccept() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    wire::SetNoDelay(fd);
    InConn c;
    c.fd = fd;
    in_.push_back(std::move(c));
    std::lock_guard<std::mutex> lk(mu_);
    ++stats_.accepts;
  }
}

void Exchange::Impl::TryAnswer(InConn* c) {
  wire::Request r;
  std::memcpy(&r, c->req, sizeof(r));
  uint32_t cnt = wire::AnswerCount(r, static_cast<uint32_t>(rank_), static_cast<uint32_t>(n_), static_cast<uint32_t>(held_));
  if (cnt == 0) return;  // stay parked until enough blocks are held
  c->parked = false;
  wire::Response h{magic_, static_cast<uint32_t>(Reply::kOk), r.first, cnt, static_cast<uint32_t>(blob_)};
  c->out.assign(reinterpret_cast<const char*>(&h), sizeof(h));
  for (uint32_t i = 0; i < cnt; ++i) c->out.append(&table_[static_cast<size_t>((r.first + i) % static_cast<uint32_t>(n_)) * blob_], blob_);
  c->off = 0;
  c->have = 0;
}

void Exchange::Impl::HandleRequest(InConn* c) {
  wire::Request r;
  std::memcpy(&r, c->req, sizeof(r));
  const Reply bad = wire::CheckRequest(r, shape_);
  if (bad == Reply::kBadMagic) {
    if (auth::JobSecret().empty())
      RR_WARN("bootstrap exchange group %llu rank %d: rejected a stranger from %s: magic %016llx, expected %016llx "
              "(another job or an older group on this port)", static_cast<unsigned long long>(opts_.group), rank_,
              wire::PeerName(c->fd).c_str(), static_cast<unsigned long long>(r.magic), static_cast<unsigned long long>(magic_));
    else  // the keyed magic is a credential: never logged
      RR_WARN("bootstrap exchange group %llu rank %d: rejected a stranger from %s: magic %016llx is not this job's "
              "(RERAIL_JOB_SECRET differs or is missing, or another group on this port)",
              static_cast<unsigned long long>(opts_.group), rank_, wire::PeerName(c->fd).c_str(),
              static_cast<unsigned long long>(r.magic));
  } else if (bad == Reply::kBadShape) {
    RR_WARN("bootstrap exchange group %llu rank %d: rejected a request from %s: nranks %u blob %u algorithm %u "
            "rank %u blocks %u+%u, expected nranks %d blob %zu algorithm %u", static_cast<unsigned long long>(opts_.group),
            rank_, wire::PeerName(c->fd).c_str(), r.nranks, r.blob_size, r.algorithm, r.from_rank, r.first, r.count, n_,
            blob_, static_cast<uint32_t>(opts_.algorithm));
  }
  if (bad != Reply::kOk) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      ++stats_.strangers;
    }
    // A stranger never learns a keyed magic (it would then be accepted): it gets 0 instead.
    const uint64_t shown = bad == Reply::kBadMagic && !auth::JobSecret().empty() ? 0 : magic_;
    wire::Response h{shown, static_cast<uint32_t>(bad), 0, 0, 0};
    c->out.assign(reinterpret_cast<const char*>(&h), sizeof(h));
    c->off = 0;
    c->close_after_write = true;
    return;
  }
  if (r.kind == static_cast<uint32_t>(Kind::kBye)) {
    byes_got_.insert(static_cast<int>(r.from_rank));
    wire::Response h{magic_, static_cast<uint32_t>(Reply::kOk), static_cast<uint32_t>(rank_), 0, 0};
    c->out.assign(reinterpret_cast<const char*>(&h), sizeof(h));
    c->off = 0;
    c->have = 0;
    return;
  }
  c->parked = true;
  TryAnswer(c);
}

bool Exchange::Impl::ServeConn(InConn* c, short revents) {
  if (c->parked) TryAnswer(c);
  if (!c->out.empty()) {
    Status s = wire::WriteSome(c->fd, c->out, &c->off);
    if (!s.ok()) return false;
    if (c->off < c->out.size()) return true;
    {
      std::lock_guard<std::mutex> lk(mu_);
      stats_.bytes_out += c->out.size();
    }
    c->out.clear();
    if (c->close_after_write) return false;
  }
  if (c->parked || !(revents & (POLLIN | POLLHUP | POLLERR))) return true;
  bool eof = false;
  Status s = wire::ReadSome(c->fd, c->req, sizeof(c->req), &c->have, &eof);
  if (!s.ok()) return false;
  if (c->have == sizeof(c->req)) {
    HandleRequest(c);
    return ServeConn(c, 0);
  }
  return !eof;
}

bool Exchange::Impl::ShouldExit() {
  std::lock_guard<std::mutex> lk(mu_);
  if (done_ && !result_.ok()) return true;
  if (!close_requested_) return false;
  bool byes_done = std::includes(byes_got_.begin(), byes_got_.end(), byes_expected_.begin(), byes_expected_.end());
  if (state_ == ClientState::kFinished && byes_done) return true;
  if (NowNs() >= linger_until_ns_) {
    RR_INFO(log::kFlagBootstrap, "bootstrap exchange group %llu rank %d: closing after linger with %zu of %zu byes",
            static_cast<unsigned long long>(opts_.group), rank_, byes_got_.size(), byes_expected_.size());
    return true;
  }
  return false;
}

void Exchange::Impl::Loop() {
  std::vector<pollfd> pfds;
  for (;;) {
    if (state_ == ClientState::kIdle) StartRequest();
    if (state_ == ClientState::kBackoff && NowNs() >= retry_at_ns_) StartRequest();
    if (ShouldExit()) break;  // after StartRequest: it may just have sent the last bye
    bool pulling = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      pulling = !done_;
    }
    if (pulling && NowNs() >= deadline_ns_) {
      Finish(Status::Remote("bootstrap exchange group " + std::to_string(opts_.group) + " rank " + std::to_string(rank_) +
                            ": timed out after " + std::to_string(opts_.timeout_ms) + " ms in pull " + std::to_string(step_) +
                            " waiting for rank " + std::to_string(peer_) + " at " + peer_addr_.ToString() +
                            (last_reason_.empty() ? std::string() : ": last error: " + last_reason_)));
      break;
    }
    pfds.clear();
    pfds.push_back({wake_fd_, POLLIN, 0});
    pfds.push_back({listen_fd_, POLLIN, 0});
    short cev = state_ == ClientState::kConnecting || state_ == ClientState::kSending ? POLLOUT
                : state_ == ClientState::kReceiving ? POLLIN : 0;
    pfds.push_back({cev ? cfd_ : -1, cev, 0});
    for (const auto& c : in_) pfds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
    int timeout = 50;
    if (state_ == ClientState::kBackoff) {
      uint64_t now = NowNs();
      timeout = retry_at_ns_ <= now ? 0 : static_cast<int>(std::min<uint64_t>(50, (retry_at_ns_ - now) / 1000000 + 1));
    }
    if (poll(pfds.data(), pfds.size(), timeout) < 0 && errno != EINTR) break;
    if (pfds[0].revents) {
      uint64_t v;
      (void)!read(wake_fd_, &v, sizeof(v));
    }
    if (pfds[1].revents) ServeAccept();
    if (cev) ClientProgress(pfds[2].revents);
    for (size_t i = 0; i < in_.size();) {
      short rev = i + 3 < pfds.size() ? pfds[i + 3].revents : 0;
      if (ServeConn(&in_[i], rev)) {
        ++i;
      } else {
        close(in_[i].fd);
        in_.erase(in_.begin() + static_cast<long>(i));
        pfds.erase(pfds.begin() + static_cast<long>(i) + 3);
      }
    }
  }
}

Status Exchange::Impl::Wait(std::vector<std::string>* blobs) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [this] { return done_; });
  if (!result_.ok()) return result_;
  lk.unlock();
  // table_ is final once done_ is set: the loop only reads it afterwards.
  blobs->resize(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) (*blobs)[i].assign(&table_[static_cast<size_t>(i) * blob_], blob_);
  return Status::Ok();
}

void Exchange::Impl::Close() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!close_requested_) {
      close_requested_ = true;
      linger_until_ns_ = NowNs() + (opts_.linger_ms ? opts_.linger_ms : opts_.timeout_ms) * 1000000ull;
    }
  }
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  Shutdown();
}

void Exchange::Impl::Shutdown() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      close_requested_ = true;
      linger_until_ns_ = 0;
    }
    thread_.join();
  }
  for (auto& c : in_) close(c.fd);
  in_.clear();
  for (auto& kv : kept_) close(kv.second);
  kept_.clear();
  for (int* fd : {&cfd_, &listen_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

Exchange::Exchange(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Exchange::~Exchange() { Close(); }

Status Exchange::Start(const Job& job, ExchangeOptions opts, std::unique_ptr<Exchange>* out) {
  auto impl = std::make_unique<Impl>(job, std::move(opts));
  RR_CHECK(impl->Init());
  out->reset(new Exchange(std::move(impl)));
  return Status::Ok();
}

Status Exchange::Wait(std::vector<std::string>* blobs) { return impl_->Wait(blobs); }
void Exchange::Close() {
  if (impl_) impl_->Close();
}
ExchangeStats Exchange::Stats() const { return impl_->Stats(); }

Status AllGather(const Job& job, const ExchangeOptions& opts, std::vector<std::string>* blobs, ExchangeStats* stats) {
  std::unique_ptr<Exchange> ex;
  RR_CHECK(Exchange::Start(job, opts, &ex));
  Status s = ex->Wait(blobs);
  ex->Close();
  if (stats) *stats = ex->Stats();
  return s;
}

}  // namespace rr::boot
