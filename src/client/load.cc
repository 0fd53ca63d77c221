#include "client/load.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

namespace tessera::client {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string TrainingJob(int i) {
  return fmt::format(R"({{"name":"bench-{}","class":"training","workers":1,"gpus_per_worker":1,)"
                     R"("memory_gib":40,"duration_s":3600}})",
                     i);
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// One connection's request in flight: its own easy handle (kept, so the connection is reused), headers,
// body and answer.
struct Conn {
  CURL* easy = nullptr;
  curl_slist* headers = nullptr;
  std::string body, answer;
  SteadyClock::time_point sent;
  ~Conn() {
    curl_slist_free_all(headers);
    if (easy) curl_easy_cleanup(easy);
  }
};

// The run: `concurrency` keep-alive connections driven by one curl multi handle on this thread through
// its socket interface (curl tells which sockets to watch, epoll says which are ready, so a wake-up costs
// one system call however many connections there are), each sending its next request as soon as the
// answer to the last one is in (a closed loop, as `concurrency` blocking clients would, without a thread
// per connection competing with the server for the CPU).
class Run {
 public:
  explicit Run(const LoadOptions& o)
      : o_(o), multi_(curl_multi_init()), epoll_(epoll_create1(EPOLL_CLOEXEC)) {
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
  }
  ~Run() {
    for (auto& c : conns_)
      if (c->easy) curl_multi_remove_handle(multi_, c->easy);
    conns_.clear();
    curl_multi_cleanup(multi_);
    if (epoll_ >= 0) close(epoll_);
  }

  LoadResult Go() {
    start_ = SteadyClock::now();
    start_unix_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    const auto start = start_;
    const int n = std::max(1, std::min(o_.concurrency, std::max(1, o_.requests)));
    for (int i = 0; i < n; ++i) {
      conns_.push_back(std::make_unique<Conn>());
      Send(*conns_.back());
    }
    while (finished_ < started_ && epoll_ >= 0) Step();
    LoadResult r;
    r.wall_s = std::chrono::duration<double>(SteadyClock::now() - start).count();
    r.errors = errors_ + (o_.requests - finished_);
    r.first_error = epoll_ >= 0 ? first_error_ : "epoll_create1 failed";
    r.submissions_per_second = r.wall_s > 0 ? static_cast<double>(latencies_ms_.size()) / r.wall_s : 0;
    r.p50_ms = Percentile(latencies_ms_, 0.50);
    r.p99_ms = Percentile(latencies_ms_, 0.99);
    r.samples = std::move(samples_);
    r.start_unix_ms = start_unix_ms_;
    return r;
  }

 private:
  // Waits for ready sockets or curl's timer (at most 100 ms), lets curl act on them, then collects.
  void Step() {
    int running = 0;
    const auto now = SteadyClock::now();
    int wait_ms = 100;
    if (timer_at_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*timer_at_ - now).count();
      wait_ms = static_cast<int>(std::clamp<int64_t>(left, 0, 100));
    }
    epoll_event ev[64];
    const int n = wait_ms == 0 ? 0 : epoll_wait(epoll_, ev, 64, wait_ms);
    for (int i = 0; i < n; ++i) {
      if (auto it = watched_.find(ev[i].data.fd); it != watched_.end() && it->second.idle) {
        OnIdleEvent(ev[i].data.fd);
        continue;
      }
      const int flags = ((ev[i].events & EPOLLIN) ? CURL_CSELECT_IN : 0) |
                        ((ev[i].events & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                        ((ev[i].events & (EPOLLERR | EPOLLHUP)) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(multi_, ev[i].data.fd, flags, &running);
    }
    if (timer_at_ && SteadyClock::now() >= *timer_at_) {
      timer_at_.reset();
      curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
    }
    Collect();
  }

  // curl's socket callback: watch `s` for what curl waits on. A socket curl stops waiting on (its
  // transfer ended; the connection is kept for the next) stays registered, as `watched_` remembers, so
  // that a keep-alive connection costs no epoll_ctl per request; an event on it before curl waits on it
  // again removes it then (OnIdleEvent), and a socket curl closes leaves the map (OnClose).
  static int OnSocket(CURL*, curl_socket_t s, int what, void* self, void*) {
    auto* run = static_cast<Run*>(self);
    if (what == CURL_POLL_REMOVE) {
      if (auto it = run->watched_.find(s); it != run->watched_.end()) it->second.idle = true;
      return 0;
    }
    const uint32_t events = (what & CURL_POLL_IN ? EPOLLIN : 0u) | (what & CURL_POLL_OUT ? EPOLLOUT : 0u);
    auto [it, fresh] = run->watched_.try_emplace(s, Watch{events, false});
    if (!fresh && it->second.events == events) {
      it->second.idle = false;
      return 0;
    }
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = s;
    if (epoll_ctl(run->epoll_, fresh ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, s, &ev) != 0)
      epoll_ctl(run->epoll_, fresh ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s, &ev);
    it->second = Watch{events, false};
    return 0;
  }

  // An event on a socket curl does not wait on: unwatched until curl asks again (or it is closed).
  void OnIdleEvent(int fd) {
    epoll_ctl(epoll_, EPOLL_CTL_DEL, fd, nullptr);
    watched_.erase(fd);
  }

  static int OnClose(void* self, curl_socket_t s) {
    static_cast<Run*>(self)->watched_.erase(s);  // closing removes it from the epoll set
    return close(s);
  }

  // curl's timer callback: act on CURL_SOCKET_TIMEOUT after `ms` (-1: no timer).
  static int OnTimer(CURLM*, long ms, void* self) {
    auto* run = static_cast<Run*>(self);
    if (ms < 0)
      run->timer_at_.reset();
    else
      run->timer_at_ = SteadyClock::now() + std::chrono::milliseconds(ms);
    return 0;
  }

 private:
  void Send(Conn& c) {
    const int i = started_++;
    if (!c.easy) {
      c.easy = curl_easy_init();
      curl_easy_setopt(c.easy, CURLOPT_URL, (o_.url + "/api/v1/jobs").c_str());
      curl_easy_setopt(c.easy, CURLOPT_TCP_NODELAY, 1L);  // else Nagle and delayed ACKs hold requests
      curl_easy_setopt(c.easy, CURLOPT_CONNECTTIMEOUT, 10L);
      curl_easy_setopt(c.easy, CURLOPT_TIMEOUT, 60L);
      curl_easy_setopt(c.easy, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(c.easy, CURLOPT_WRITEFUNCTION, Append);
      curl_easy_setopt(c.easy, CURLOPT_WRITEDATA, &c.answer);
      curl_easy_setopt(c.easy, CURLOPT_PRIVATE, &c);
      curl_easy_setopt(c.easy, CURLOPT_CLOSESOCKETFUNCTION, OnClose);
      curl_easy_setopt(c.easy, CURLOPT_CLOSESOCKETDATA, this);
    }
    curl_slist_free_all(c.headers);
    c.headers = nullptr;
    for (const std::string& h : {"Authorization: Bearer " + o_.token,
                                 "Idempotency-Key: " + o_.key_prefix + std::to_string(i),
                                 std::string("Content-Type: application/json"), std::string("Expect:")})
      c.headers = curl_slist_append(c.headers, h.c_str());
    c.body = TrainingJob(i);
    c.answer.clear();
    curl_easy_setopt(c.easy, CURLOPT_HTTPHEADER, c.headers);
    curl_easy_setopt(c.easy, CURLOPT_POSTFIELDS, c.body.c_str());
    curl_easy_setopt(c.easy, CURLOPT_POSTFIELDSIZE, static_cast<long>(c.body.size()));
    c.sent = SteadyClock::now();
    curl_multi_add_handle(multi_, c.easy);
  }

  // Records every finished request and sends the connection's next one.
  void Collect() {
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_, &left)) {
      if (m->msg != CURLMSG_DONE) continue;
      Conn* c = nullptr;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, reinterpret_cast<char**>(&c));
      const double ms = std::chrono::duration<double, std::milli>(SteadyClock::now() - c->sent).count();
      long status = 0;
      curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
      const CURLcode result = m->data.result;
      curl_multi_remove_handle(multi_, c->easy);
      ++finished_;
      if (result == CURLE_OK && status >= 200 && status < 300) {
        latencies_ms_.push_back(ms);
        samples_.push_back({std::chrono::duration<double, std::milli>(c->sent - start_).count(), ms});
      } else {
        if (errors_++ == 0)
          first_error_ = result != CURLE_OK ? std::string(curl_easy_strerror(result))
                                            : fmt::format("HTTP {}: {}", status, c->answer.substr(0, 300));
      }
      if (started_ < o_.requests) Send(*c);
    }
  }

  const LoadOptions& o_;
  CURLM* multi_;
  int epoll_;
  std::optional<SteadyClock::time_point> timer_at_;
  struct Watch {
    uint32_t events;
    bool idle;  // curl does not wait on it now
  };
  std::unordered_map<int, Watch> watched_;  // the sockets in epoll_
  std::vector<std::unique_ptr<Conn>> conns_;
  int started_ = 0, finished_ = 0;
  int64_t errors_ = 0;
  std::string first_error_;
  std::vector<double> latencies_ms_;
  SteadyClock::time_point start_;
  double start_unix_ms_ = 0;
  std::vector<LoadResult::Sample> samples_;
};

}  // namespace

double Percentile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples.size())));
  return samples[std::clamp<size_t>(rank, 1, samples.size()) - 1];
}

LoadResult RunSubmitLoad(const LoadOptions& o) {
  if (o.url.rfind("http://", 0) != 0 && o.url.rfind("https://", 0) != 0) {
    LoadResult r;
    r.errors = o.requests;
    r.first_error = "bad URL " + o.url + " (http:// or https:// expected)";
    return r;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  LoadResult r = Run(o).Go();
  curl_global_cleanup();
  return r;
}

}  // namespace tessera::client
