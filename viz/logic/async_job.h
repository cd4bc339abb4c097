#pragma once
// A computation that runs off the UI thread: the UI posts requests and polls for results, never
// waiting. Only the latest request is kept while one is running (knobs dragged quickly coalesce).

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <utility>

namespace flt::viz {

template <typename Request, typename Result>
class AsyncJob {
 public:
  explicit AsyncJob(std::function<Result(const Request&)> compute) : compute_(std::move(compute)) {}
  ~AsyncJob() { wait(); }
  AsyncJob(const AsyncJob&) = delete;
  AsyncJob& operator=(const AsyncJob&) = delete;

  /// Asks for a result for `request`; if one is being computed, this one waits (replacing any
  /// other waiting request).
  void request(Request request) {
    pending_ = std::make_unique<Request>(std::move(request));
    if (!running_.valid()) poll();
  }
  /// Takes a finished result and starts the waiting request; true when the result changed.
  bool poll() {
    bool changed = false;
    if (running_.valid() &&
        running_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      result_ = running_.get();
      changed = true;
    }
    if (!running_.valid() && pending_) {
      std::shared_ptr<Request> next(std::move(pending_));
      running_ =
          std::async(std::launch::async, [compute = compute_, next] { return compute(*next); });
    }
    return changed;
  }
  bool busy() const { return running_.valid() || pending_ != nullptr; }
  const Result& result() const { return result_; }
  /// Blocks until idle (tests and headless rendering only).
  void wait() {
    while (running_.valid() || pending_) {
      if (running_.valid()) running_.wait();
      poll();
    }
  }

 private:
  std::function<Result(const Request&)> compute_;
  std::future<Result> running_;
  std::unique_ptr<Request> pending_;
  Result result_{};
};

}  // namespace flt::viz
