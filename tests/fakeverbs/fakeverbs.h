// fakeverbs — control API of the fake libibverbs (libfakeverbs.so) that rerail's IB tests load with
// RERAIL_IB_LIB=<path>/libfakeverbs.so on hosts without RDMA.
//
// Contract
//   * The library exports the verbs entry points rerail resolves (IBVERBS_1.1, ibv_reg_mr_iova2 @1.8,
//     ibv_reg_dmabuf_mr @1.12) and these control functions under their own version node FAKEVERBS_1.0.
//     A test reaches them with dlopen(<same path>, RTLD_NOW | RTLD_NOLOAD) + dlsym: the handle is the
//     very library rerail loaded, so both act on one fabric.
//   * One process is one fabric: every fake device reaches every other fake device of the same link
//     layer. With FAKEVERBS_WIRE=<dir> the processes given the same directory are the hosts of one
//     fabric (same devices, per-host addresses; fake_host.cc): WRs towards another host's device go to
//     that process, whose thread executes them without waiting for its application to poll; the
//     faults below act on this process's ports and the traffic touching them (FAKEVERBS_FAULT_AT arms
//     one in another process; FAKEVERBS_CONTROL=<fifo> lets a script command them in a running process,
//     same semantics: see README.md and fake_fabric.h's Control). Devices (env, read once at first use): FAKEVERBS_DEVICES = number of devices fake0..fakeN-1
//     (default 2, one port each); FAKEVERBS_LINK_LAYER = roce (default) | ib; FAKEVERBS_PORT_DOWN =
//     "fake1:1,fake0:1" ports that start down; FAKEVERBS_BURST = WRs each QP executes per progress step
//     (default 4).
//   * "Wire time" is a progress step run inside every ibv_poll_cq (any CQ, any thread, under the
//     fabric's one lock): each QP in turn (the first QP rotates each step, so nothing orders QPs against
//     each other) executes up to BURST of its posted WRs in order. No threads of its own; retry timeouts
//     are measured on the steady clock, so a dead path fails after 4.096 us x 2^timeout x (retry_cnt+1).
//   * Thread-safe; returns 0 on success, -1 for an unknown device or port.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Faults a port can carry (fakeverbs_set_fault).
enum fakeverbs_fault {
  FAKEVERBS_FAULT_NONE = 0,
  FAKEVERBS_FAULT_DROP_DATA = 1,  // black hole: nothing arrives, the sender ends in RETRY_EXC_ERR
  FAKEVERBS_FAULT_DROP_ACKS = 2,  // data lands (and the receiver completes) but the sender's acks are
                                  // lost: the sender ends in RETRY_EXC_ERR all the same
  FAKEVERBS_FAULT_DROP_OUT = 3,   // one-way: the requests this port sends are lost (its WRs end in
                                  // RETRY_EXC_ERR), the requests it receives land and are answered
};

// Takes a port down (up = 0) or up: the port's state changes, every open context of the device gets
// IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE on its async fd, WRs executed on a QP of a down port
// complete with LOC_QP_OP_ERR, WRs towards it end in RETRY_EXC_ERR once their retries run out.
int fakeverbs_set_port_state(const char* dev, int port, int up);
// Sets the fault of traffic leaving or entering a port (fakeverbs_fault).
int fakeverbs_set_fault(const char* dev, int port, int fault);
// The device dies: IBV_EVENT_DEVICE_FATAL on its contexts, its QPs go to ERR (everything flushes),
// later posts fail with EIO.
int fakeverbs_device_fatal(const char* dev);

#ifdef __cplusplus
}
#endif
