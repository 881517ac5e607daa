// rerail fault tests — background fault schedules on a NetnsTopology (flapping rails, random soak).
//
// Contract
//   * One background thread per injector runs the schedule through scripts/netns-rails.sh; every
//     applied action is appended to log() with a CLOCK_MONOTONIC timestamp so a test can correlate
//     what its traffic saw with what was done.
//   * StartFlap(): rail r of host h goes down and up `count` times, one period_ms each (down for half
//     of it), on an absolute schedule (`netns-rails.sh flap`); it ends with the link up. Stop() cannot
//     cut it short: it returns when the schedule ends (count × period_ms).
//   * StartRandom(): every min_ms..max_ms (uniform, seeded) heals the previous fault and applies a new
//     one — fail (carrier or admin), blackhole or slow — to a random (host, rail). At most one rail
//     is faulty at any moment, so with 2+ rails every host pair keeps a working rail. Ends healed.
//   * Wait() blocks until the schedule ends; Stop() ends it early (bounded by one script call) and
//     heals. The destructor calls Stop(). One schedule at a time per injector.
//   * The topology must outlive the injector. Script failures are recorded in log() with ok=false,
//     never thrown.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "netns_fixture.h"
#include "rerail/clock.h"

namespace rr::testing {

class FaultInjector {
 public:
  struct Action {
    uint64_t t_ns;     // CLOCK_MONOTONIC when the script call returned
    int host, rail;
    std::string what;  // "fail carrier", "fail admin", "blackhole", "slow 50mbit", "heal"
    bool ok;           // the script call succeeded
  };

  explicit FaultInjector(NetnsTopology& t) : t_(t) {}
  ~FaultInjector() { Stop(); }
  FaultInjector(const FaultInjector&) = delete;
  FaultInjector& operator=(const FaultInjector&) = delete;

  void StartFlap(int h, int r, int period_ms, int count, const std::string& mode = "carrier") {
    Start([=] {
      // One script call runs the whole schedule (only `ip link` per toggle, so short periods hold);
      // each toggle is logged when its line arrives.
      std::string cmd = "RERAIL_NETNS_PREFIX=" + t_.prefix() + " bash " RERAIL_NETNS_SCRIPT " flap " +
                        std::to_string(h) + " " + std::to_string(r) + " " + std::to_string(period_ms) + " " +
                        std::to_string(count) + " " + mode + " 2>&1";
      FILE* p = popen(cmd.c_str(), "r");
      if (p == nullptr) return Record(h, r, "flap: popen failed", false);
      char line[256];
      while (fgets(line, sizeof line, p) != nullptr) {
        std::string l(line);
        bool down = l.find(" down") != std::string::npos, up = l.find(" up") != std::string::npos;
        Record(h, r, down ? "fail " + mode : up ? "heal" : "flap: " + l, down || up);
      }
      if (pclose(p) != 0) Record(h, r, "flap: script failed", false);
    });
  }

  void StartRandom(uint32_t seed, int min_ms, int max_ms, int duration_ms, const std::string& slow_rate = "50mbit") {
    Start([=] {
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int> gap(min_ms, max_ms), host(0, t_.hosts() - 1), rail(0, t_.rails() - 1),
          kind(0, 3);
      const std::string kinds[] = {"fail carrier", "fail admin", "blackhole", "slow " + slow_rate};
      uint64_t end = NowMs() + static_cast<uint64_t>(duration_ms);
      int fh = -1, fr = -1;
      while (!stop_ && NowMs() < end) {
        if (fh >= 0) Apply(fh, fr, "heal");
        fh = host(rng);
        fr = rail(rng);
        Apply(fh, fr, kinds[kind(rng)]);
        Sleep(gap(rng));
      }
      if (fh >= 0) Apply(fh, fr, "heal");
    });
  }

  void Wait() {
    if (th_.joinable()) th_.join();
  }
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    Wait();
  }
  std::vector<Action> log() const {
    std::lock_guard<std::mutex> l(mu_);
    return log_;
  }

 private:
  template <class F>
  void Start(F body) {
    Stop();
    stop_ = false;
    th_ = std::thread(body);
  }
  void Record(int h, int r, const std::string& what, bool ok) {
    std::lock_guard<std::mutex> l(mu_);
    log_.push_back({NowNs(), h, r, what, ok});
  }
  void Apply(int h, int r, const std::string& what) {
    CmdResult c = t_.Script(what.rfind("fail ", 0) == 0
                                ? "fail " + std::to_string(h) + " " + std::to_string(r) + " " + what.substr(5)
                            : what.rfind("slow ", 0) == 0
                                ? "slow " + std::to_string(h) + " " + std::to_string(r) + " " + what.substr(5)
                                : what + " " + std::to_string(h) + " " + std::to_string(r));
    std::lock_guard<std::mutex> l(mu_);
    log_.push_back({NowNs(), h, r, what, c.rc == 0});
  }
  void Sleep(int ms) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_for(l, std::chrono::milliseconds(ms), [this] { return stop_.load(); });
  }

  NetnsTopology& t_;
  std::thread th_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  std::vector<Action> log_;
};

}  // namespace rr::testing
