// rerail — THE table of RERAIL_* parameters. Every knob is declared here and nowhere else; the README
// table is generated from it (`rerail-params --markdown`, see tools/). Add a row, never read getenv.
//
// RR_PARAM(Id, "NAME", type, "default", "units", "choices or min:max", "help")
//   type: kInt (range "min:max"), kBool, kString, kEnum (choices "a|b|c").
//   NAME is the variable without the RERAIL_ prefix.
//
// NOLINTBEGIN
#define RERAIL_PARAM_TABLE(RR_PARAM)                                                                        \
  /* general */                                                                                            \
  RR_PARAM(DumpParams, "DUMP_PARAMS", kBool, "0", "", "", "Print every RERAIL_* parameter and its value at init") \
  /* TCP transport */                                                                                      \
  RR_PARAM(TcpIfname, "TCP_IFNAME", kString, "", "",  "",                                                  \
           "Interfaces to use as rails, NCCL syntax: prefix list 'eth,ens', '^' excludes, '=' exact match. "   \
           "Empty: every up, non-loopback interface with an IPv4/IPv6 address (loopback if nothing else)")     \
  RR_PARAM(TcpStreams, "TCP_STREAMS", kInt, "2", "sockets", "1:16", "TCP streams per link (per rail per connection)") \
  RR_PARAM(TcpDuplex, "TCP_DUPLEX", kEnum, "auto", "", "auto|0|1",                                         \
           "When two processes send to each other on the same rail, one TCP connection carries both directions' " \
           "link-0 frames (replies ride the requests' connection: small-message latency; docs/hot-path-latency.md). "        \
           "auto: on with the stripe policy (the TCP default), off with failover (measured slower there). "        \
           "Closing a connection while the other one of its pair has messages in flight on the shared socket costs that one a logged failover (nothing is lost)") \
  RR_PARAM(ChunkSize, "CHUNK_SIZE", kInt, "131072", "bytes", "4096:67108864",                             \
           "Largest piece of a message sent as one unit on one stream (the unit of striping and re-send), in whole eighths; a message smaller than one chunk per usable rail is cut into one chunk per rail") \
  RR_PARAM(EagerMax, "EAGER_MAX", kInt, "16384", "bytes", "0:262144",                                      \
           "Sends up to this size are copied into the connection's re-send pool (RERAIL_EAGER_POOL) and complete once written " \
           "(no wait for the receiver's ack: small-message latency); 0 disables")                              \
  RR_PARAM(EagerPool, "EAGER_POOL", kInt, "1048576", "bytes", "0:67108864",                               \
           "Bytes of eager-send copies one connection may hold until acknowledged; a send that does not fit " \
           "is sent the normal way")                                                                          \
  RR_PARAM(MaxRecvs, "MAX_RECVS", kInt, "0", "buffers", "0:8",                                            \
           "maxRecvs offered to NCCL (grouped receives, TCP and IB; 8 = NCCL's IB default, lets NCCL share comms across PXN peers); " \
           "0 = automatic: 8 with RERAIL_TRANSPORT=ib when IB ports are offered, 1 on TCP. " \
           "Above 1 a sender takes a message slot only once the receiver announced it (no send before the receive " \
           "is posted); set the same value in every process")                                 \
  RR_PARAM(TcpBufSize, "TCP_SOCKBUF", kInt, "0", "bytes", "0:268435456", "SO_SNDBUF/SO_RCVBUF per stream; 0 keeps the kernel's autotuning") \
  RR_PARAM(ConnectTimeoutMs, "CONNECT_TIMEOUT_MS", kInt, "30000", "ms", "100:3600000",                    \
           "How long connect/accept keep retrying a rail before giving up on it")                              \
  /* IB verbs transport (issue 12) */                                                                      \
  RR_PARAM(Transport, "TRANSPORT", kEnum, "tcp", "", "tcp|ib",                                               \
           "tcp: NCCL devices are the TCP interfaces. ib: they are the IB/RoCE ports found (RERAIL_IB_LIB, RERAIL_IB_HCA; none is an init error) " \
           "and data travels over RC QPs; each connection's link handshakes use one TCP bootstrap stream (RERAIL_TCP_IFNAME). Both ends must agree") \
  RR_PARAM(IbLib, "IB_LIB", kString, "libibverbs.so.1", "", "",                                            \
           "libibverbs to dlopen at init (a name the dynamic loader resolves, or a path with '/'); 'none' disables IB. " \
           "Where it cannot be opened, or lists no device, only TCP devices are offered (RERAIL_TRANSPORT=ib: init fails)") \
  RR_PARAM(IbHca, "IB_HCA", kString, "", "", "",                                                           \
           "HCAs/ports to use, NCCL syntax: prefix list 'mlx5_0:1,mlx5_1' (':port' optional), '^' excludes, '=' exact names. Empty: every active port") \
  RR_PARAM(IbGidIndex, "IB_GID_INDEX", kInt, "-1", "", "-1:1023",                                          \
           "RoCE GID index; -1 picks one as NCCL does (the RERAIL_IB_ADDR_FAMILY address of RoCE version RERAIL_IB_ROCE_VERSION, else index 0)") \
  RR_PARAM(IbAddrFamily, "IB_ADDR_FAMILY", kEnum, "ipv4", "", "ipv4|ipv6",                                  \
           "Address family of the RoCE GID the automatic choice prefers (IPv4-mapped or global IPv6)")      \
  RR_PARAM(IbRoceVersion, "IB_ROCE_VERSION", kInt, "2", "", "1:2", "RoCE version the automatic GID choice prefers") \
  RR_PARAM(IbTimeout, "IB_TIMEOUT", kInt, "14", "", "1:31",                                                \
           "RC QP local ACK timeout exponent: one try waits 4.096 us x 2^value (14: 67 ms). With RERAIL_IB_RETRY_CNT it bounds how long a dead path " \
           "takes to fail (14 and 3: ~270 ms; NCCL's 20 and 7: ~34 s) before rerail fails over") \
  RR_PARAM(IbRetryCnt, "IB_RETRY_CNT", kInt, "3", "", "0:7", "RC QP transport retries before RETRY_EXC_ERR (see RERAIL_IB_TIMEOUT)") \
  RR_PARAM(IbQpsPerLink, "IB_QPS_PER_LINK", kInt, "1", "QPs", "1:16",                                      \
           "RC QPs per IB link (per rail per connection; NCCL_IB_QPS_PER_CONNECTION's role and default): the sender's value, which the receiver follows") \
  RR_PARAM(IbTcpFallback, "IB_TCP_FALLBACK", kBool, "0", "", "",                                             \
           "RERAIL_TRANSPORT=ib: each connection also gets one TCP link (RERAIL_TCP_STREAMS streams, over the bootstrap's interface) that carries " \
           "data only while none of its IB links is usable: a comm whose IB ports all fail goes on over TCP with nothing lost, and goes back to IB " \
           "when a port returns. The sender's value (the receiver accepts the link either way); ignored with RERAIL_TRANSPORT=tcp") \
  /* resilience */                                                                                         \
  RR_PARAM(Policy, "POLICY", kEnum, "auto", "", "auto|stripe|failover",                                    \
           "stripe: use every healthy rail; failover: primary rail only while healthy and not degraded (measured below 0.4x of a survivor); auto: stripe on TCP, failover on IB") \
  RR_PARAM(StallMs, "STALL_MS", kInt, "1000", "ms", "10:600000",                                            \
           "A link whose bytes in flight get no TCP acknowledgement for this long is failed (black hole)") \
  RR_PARAM(HeartbeatMs, "HEARTBEAT_MS", kInt, "200", "ms", "10:60000", "Heartbeat interval on idle links")   \
  RR_PARAM(GiveupMs, "GIVEUP_MS", kInt, "30000", "ms", "100:86400000",                                     \
           "test() returns an error only when no link to the peer has worked for this long")                   \
  RR_PARAM(FailbackMinMs, "FAILBACK_MIN_MS", kInt, "100", "ms", "10:600000", "First re-probe delay of a failed rail") \
  RR_PARAM(FailbackMaxMs, "FAILBACK_MAX_MS", kInt, "5000", "ms", "10:3600000",                             \
           "Cap of the exponential back-off between re-probes (probing never gives up); while no link to the peer is usable, RERAIL_GIVEUP_MS / 8") \
  RR_PARAM(FailbackProbationMs, "FAILBACK_PROBATION_MS", kInt, "2000", "ms", "0:3600000",                   \
           "A failed-back rail's re-probe back-off restarts from RERAIL_FAILBACK_MIN_MS only after it stayed up this long; " \
           "one that fails sooner (e.g. ack-only loss: probes answered, data not acknowledged) waits twice as long each time, up to RERAIL_FAILBACK_MAX_MS. 0: restart at once") \
  RR_PARAM(LinkEvents, "LINK_EVENTS", kBool, "1", "", "", "Watch rtnetlink link-down/up events (libnl-route-3)") \
  RR_PARAM(Board, "BOARD", kBool, "1", "", "", "Publish rail health in shared memory for rerail-top and the tuner") \
  RR_PARAM(BoardDir, "BOARD_DIR", kString, "/dev/shm", "", "",                                          \
           "Directory of the rail-health boards (a tmpfs); rerail-top and the tuner read every board there")   \
  RR_PARAM(NetnsPrefix, "NETNS_PREFIX", kString, "rrnet", "", "",                                           \
           "scripts/netns-rails.sh and the fault tests: name prefix of the simulated hosts' namespaces")       \
  /* profiler */                                                                                           \
  RR_PARAM(ProfileMask, "PROFILE_MASK", kString, "coll,p2p,proxyop,net", "", "",                           \
           "Event kinds the profiler writes: group,coll,p2p,proxyop,proxystep,proxyctrl,kernelch,net,groupapi,collapi,p2papi,kernellaunch,cecoll,cesync,cebatch, all, or a number")   \
  RR_PARAM(ProfileDir, "PROFILE_DIR", kString, ".", "", "", "Directory for trace JSON, summary and Prometheus textfile") \
  RR_PARAM(ProfileFlushS, "PROFILE_FLUSH_S", kInt, "0", "s", "0:86400", "Also write outputs every N seconds (0: only at finalize)") \
  RR_PARAM(ProfileRing, "PROFILE_RING", kInt, "32768", "records", "1024:16777216",                       \
           "Per-thread profiler ring (128 B records, rounded up to a power of 2); when full, records are dropped and counted") \
  /* tuner */                                                                                              \
  RR_PARAM(TunerEnable, "TUNER_ENABLE", kBool, "1", "", "", "0: the tuner plugin loads but leaves every NCCL choice alone") \
  RR_PARAM(TunerHealth, "TUNER_HEALTH", kBool, "0", "", "", "1: this rank's rail health changes NCCL's choices (bandwidth terms, channels, degraded rules). Off by default: NCCL needs every rank to make the same choice per collective and ranks see failures and failbacks at different times (a wrong all_reduce on a GPU run); rules without a health condition always apply") \
  RR_PARAM(TunerRefreshMs, "TUNER_REFRESH_MS", kInt, "100", "ms", "0:60000",                              \
           "How often the tuner re-reads rail health (0: on every collective)")                           \
  RR_PARAM(TunerChannelsPerRail, "TUNER_CHANNELS_PER_RAIL", kInt, "2", "channels", "0:64",                  \
           "When rails are lost, the tuner caps a collective's channels at healthy rails x this (0: never sets channels)") \
  RR_PARAM(TunerConfig, "TUNER_CONFIG", kString, "", "", "",                                                \
           "Optional tuner rule file (format in tuner_plugin/README.md); malformed lines are logged and ignored") \
  RR_PARAM(TunerBoard, "TUNER_BOARD", kString, "", "", "",                                                  \
           "Rail-health board the tuner reads; empty: <RERAIL_BOARD_DIR>/rerail-board.<pid>.net (this process's net plugin)") \
  /* bootstrap */                                                                                          \
  RR_PARAM(Hosts, "HOSTS", kString, "", "", "", "Job hosts: comma list or Slurm node list (gpu[001-004,010]); alias SLURM_JOB_NODELIST") \
  RR_PARAM(RanksPerHost, "RANKS_PER_HOST", kInt, "0", "ranks", "0:65536", "Ranks on each host of the bootstrap plan (alias N_PROC_PER_NODE); 0 = unset (1)") \
  RR_PARAM(PortBase, "PORT_BASE", kInt, "0", "port", "0:65535", "First port of the symmetric bootstrap plan (alias HPCT_PORT_BASE); 0 = unset") \
  RR_PARAM(PortSpan, "PORT_SPAN", kInt, "1024", "ports", "1:65535", "Ports the plan wraps within") \
  RR_PARAM(JobId, "JOB_ID", kString, "", "", "", "Job identity mixed into per-(job, group) magics (alias SLURM_JOB_ID); empty: 'rerail'") \
  RR_PARAM(JobSecret, "JOB_SECRET", kString, "", "", "", "Secret shared by the job: hellos of net links and bootstrap requests then carry an HMAC-SHA256 keyed by it and peers without it are rejected; never printed") \
  RR_PARAM(Rootless, "ROOTLESS", kBool, "0", "", "", "Ask frameworks to use rootless, store-less init (alias HPCT_USE_ROOTLESS)") \
  RR_PARAM(BootTimeoutMs, "BOOT_TIMEOUT_MS", kInt, "120000", "ms", "100:86400000", "Deadline of the rootless exchange (peers are retried until then)") \
  RR_PARAM(NcclLib, "NCCL_LIB", kString, "libnccl.so.2", "", "", "libnccl the bootstrap resolves at run time (dlopen name or path)") \
  RR_PARAM(ForceStaging, "FORCE_STAGING", kBool, "0", "", "", "Send and receive every chunk through the CPU staging backend (bounce slots); for tests of the staged path. Also offers GPU buffers (as RERAIL_GPU_BUFFERS=1)") \
  RR_PARAM(GpuBuffers, "GPU_BUFFERS", kBool, "0", "", "", "Advertise NCCL_PTR_CUDA when the CUDA driver works: NCCL may then hand GPU buffers (GDR, if NCCL_NET_GDR_LEVEL allows), staged through host slots by the driver's copies; 0: host buffers only (NCCL stages)") \
  RR_PARAM(StagingSlots, "STAGING_SLOTS", kInt, "0", "slots", "0:65536", "Experimental: page-locked bounce slots of RERAIL_CHUNK_SIZE bytes pinned at init when GPU buffers are offered (a slot per stream of a link in use; beyond them, and at 0, GPU chunks are copied from pageable slots). Faster alone (0.80 vs 0.52 of host buffers on an H200) but NCCL runs through them hung there: keep 0")
// NOLINTEND
