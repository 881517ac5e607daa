// rerail — one TCP connection carrying both directions between two processes (RERAIL_TCP_DUPLEX:
// on by default with the stripe policy; docs/hot-path-latency.md).
//
// NCCL gives a plugin one send comm per direction, each its own connection, so every connection
// carries data one way only and each small message costs its reader's kernel a pure ACK on the
// critical path (a ping-pong's round trip is ~1.5x one connection's). With RERAIL_TCP_DUPLEX, when a
// process holds a send comm X to a peer process and a receive comm Y from the same process, on the same
// rail, the peer's send comm of Y also writes its frames on X's socket (stream 0 of link 0), as one
// more stream of Y's link 0: replies ride the connection the requests came on.
//
// Identity (no wire field): a connection id's high 32 bits are its sending process' instance id
// (NewConnId), a listen nonce's first 4 bytes its listening process' (StampNonce). A receive comm knows
// its sender's instance from the connection id; a send comm its receiver's from the handle's nonce.
// Instances are random, not secret: they steer pairing between processes of one job (which all hold
// each other's handles), they authenticate nothing. A kShare is taken only from a link that passed the
// listener's checks, for a send comm of this process whose receiver is that link's sender; two
// processes with the same instance (~n^2/2^33 for n processes) at worst pair nothing.
//
// Which socket, and who does what. Of X (A->B) and Y (B->A), the connection with the smaller id gives
// its link-0 stream-0 socket; say X. On A (that socket's sender, the "initiator"): X's send comm finds
// Y's receive comm, which adopts the socket as its reader (one stream more on Y's link 0; X's control
// frames it reads there go to the port's mailbox, which X's send comm reads instead of the socket);
// then X's send comm writes a kShare frame there naming Y. On B: X's receive comm reads that kShare and
// offers the socket (through the registry) to Y's send comm, which writes there as one more stream of
// its link 0. Both ends' receive comms park their link-0 acks on the port for the partner send comm's
// next small frame there (the acks ride the replies, "held" below); the owner's reader on B hands
// Y's acks to Y's send comm through the mailbox. Y's other control frames keep going on Y's own
// socket. A frame half written holds the shared socket (the port's writer).
//
// Failure: the shared socket is link 0's on both comms that use it. A read error, an EOF or a
// protocol error there fails the socket's owner's link 0 (the owner learns it through the port) and,
// mid-frame, the adopter's link 0; a write error there fails the borrowing send comm's link 0, and so
// does a dead port while a message with a chunk written there is unacknowledged or a frame is half
// written there (the core re-sends). An adopter
// whose link 0 ends for any other reason (its connection closed, its own socket reset, a notice from
// its sender) hands the reading back to the owner, which reads the socket again from the adopter's
// position, skipping the adopter's connection's frames by their length; only a header that is no
// frame's (no boundary to skip to) fails the owner's link 0 instead. So nothing is lost, and a close
// with nothing in flight costs no failover; a close while the other connection has frames on the
// shared socket costs it a logged failover of link 0 (the unsharing handshake of the plan would avoid
// it).
//
// Thread-safety: the registry's comms mutex is held while a send comm drives its partner receive
// comm (try-lock of the partner's drive mutex: never blocks on it); offers have a mutex of their own;
// a port's fields are guarded by its mutex. Lock order: a comm's drive mutex, then the registry's
// comms mutex, then the partner's drive mutex (try only), then offers and ports.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "handle.h"
#include "transport.h"
#include "wire.h"

namespace rr::net {

class RecvComm;
class SendComm;

// This process' random instance id (never 0).
uint32_t ProcessInstance();
// A fresh connection id: this process' instance in the high 32 bits, distinct low 32 bits.
Status NewConnId(uint64_t* id);
// Writes this process' instance into the first 4 bytes of a fresh listen nonce.
void StampNonce(Nonce* n);
inline uint32_t InstanceOfConn(uint64_t conn_id) { return static_cast<uint32_t>(conn_id >> 32); }
uint32_t InstanceOfNonce(const Nonce& n);

// The shared socket of a pair of comms.
struct DuplexPort {
  std::mutex mu;
  // The socket's link (stream 0 is shared); null once its owner let it go. Set and used under mu; read
  // without it only to see whether it is gone (a send comm's pass).
  std::atomic<Link*> link{nullptr};
  uint64_t owner_conn = 0;  // the connection whose link 0 it is
  uint64_t guest_conn = 0;  // the connection whose sender writes there too
  // Initiator's end: control frames of the owner (a send comm) read by the adopting receive comm.
  std::deque<Frame> mailbox;
  std::vector<uint8_t> leftover;  // bytes the owner had read ahead when it handed the reading over
  std::string failed;             // the adopter saw the socket fail (the owner fails its link 0)
  bool failed_eof = false;        // ... by an orderly close of the peer
  // The adopter's connection ended in order (its comm closed, or its sender closed it): the owner reads
  // the socket again, from `leftover`, first skipping `skip` bytes (the rest of a payload the adopter
  // was reading), then skipping the ended connection's frames by their length.
  bool handback = false;
  size_t skip = 0;
  // A frame half written by 1 = the send comm (the borrower's, or on the initiator's end the owner's),
  // 2 = the receive comm.
  int writer = 0;
  std::atomic<bool> poisoned{false};  // the borrower let go of it mid-frame: the owner must fail the socket

  // Acks ride the replies. The receive comm of the pair parks its link-0 acks here at the end of a pass
  // instead of writing them; the send comm's next small frame on this socket takes them into the same
  // writev (one segment each way per round trip, not an ack segment before the reply). What no frame took
  // by the receive comm's next pass it writes itself (on the initiator's end on its own socket: acks do
  // not queue behind bulk data there). The reader at the other end hands them to their send comm through
  // its mailbox. `held_done`: bytes of held[0] already written (the socket holds it mid-frame: whoever
  // writes next finishes it first).
  static constexpr size_t kMaxHeld = 4;
  std::vector<Frame> held;
  size_t held_done = 0;
  // The reader at the other end routes the receive comm's acks to their send comm: on the reactor's end
  // once the borrower took the offer, on the initiator's once the adopter read a frame of its own
  // connection there (the peer's send comm borrowed the socket, so its receive comm routes; a peer
  // without RERAIL_TCP_DUPLEX, or whose send comm is gone, never does). Connection ids whose low 32
  // bits (Frame::conn) are equal never.
  bool hold_ok = false;
  bool AllowHeld();  // sets hold_ok (takes mu); returns it
  // Parks an ack unless parking is off, the socket is gone or kMaxHeld wait already. Takes mu.
  bool Hold(const Frame& f);
  // Moves the parked acks, whole, to *out (also a cut one when even_cut: the socket is gone); false
  // when none moved. Takes mu.
  bool TakeHeld(std::vector<Frame>* out, bool even_cut);
  size_t HeldBytes() const;
  // Whether held / mailbox have anything, for a pass that looks without mu (set under mu by Flags()).
  std::atomic<bool> any_held{false};
  std::atomic<bool> any_mail{false};
  void Flags() {
    any_held.store(!held.empty(), std::memory_order_release);
    any_mail.store(!mailbox.empty(), std::memory_order_release);
  }

  // Writes a frame's bytes for `who` unless the other holds the socket mid-frame (kAgain). frame_left:
  // bytes of the frame not written before this call (0 with no iov: only held frames are written).
  // take_held: the parked acks go first (at a frame's start only); a cut one always does. *n counts
  // the caller's bytes only. Takes mu.
  IoState Write(int who, const iovec* iov, int iovcnt, size_t frame_left, bool take_held, size_t* n, int* err);
};

class DuplexRegistry {
 public:
  static DuplexRegistry& Get();
  static void FreeAtUnload();  // at library unload: frees the registry if no comm is registered

  struct RecvInfo {
    RecvComm* comm;
    uint64_t conn;
  };
  void AddRecv(RecvComm* c, uint64_t conn);
  void RemoveRecv(RecvComm* c);  // after it returns no send comm calls into c
  // peer: the instance of the process the send comm sends to.
  void AddSend(SendComm* c, uint64_t conn, uint32_t peer, std::atomic<bool>* offer_flag);
  void RemoveSend(SendComm* c);

  // Initiator: calls fn on each registered receive comm (comms mutex held) until fn returns true.
  bool ForEachRecv(const std::function<bool(const RecvInfo&)>& fn);
  // Runs fn on the receive comm of `conn`, comms mutex held; false when there is none.
  bool WithRecv(uint64_t conn, const std::function<void(RecvComm*)>& fn);

  // Reactor: offers `port` to the send comm of `conn` if it sends to process `peer` (the sender of the
  // receive comm that read the kShare); false (nothing offered) when there is none.
  bool Offer(uint64_t send_conn, uint32_t peer, std::shared_ptr<DuplexPort> port);
  std::shared_ptr<DuplexPort> TakeOffer(uint64_t send_conn);

 private:
  std::mutex comms_mu_;
  std::vector<RecvInfo> recvs_;
  std::mutex offers_mu_;
  struct SendInfo {
    SendComm* comm;
    uint64_t conn;
    uint32_t peer;
    std::atomic<bool>* flag;
  };
  std::vector<SendInfo> sends_;
  std::map<uint64_t, std::shared_ptr<DuplexPort>> offers_;
};

}  // namespace rr::net
