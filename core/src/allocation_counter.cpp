#include "flt/allocation_counter.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <mutex>

namespace flt {
namespace {

// Wraps the default CPU allocator; each allocation carries its size in its deleter context.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t bytes) const override {
    auto inner = base_->allocate(bytes);
    void* data = inner.get();
    auto* ctx = new Context{std::move(inner), bytes, this};
    const size_t now = live_.fetch_add(bytes) + bytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, ctx, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void reset_peak() const { peak_.store(live_.load()); }
  size_t live() const { return live_.load(); }
  size_t peak() const { return peak_.load(); }

 private:
  struct Context {
    c10::DataPtr inner;
    size_t bytes;
    const CountingAllocator* owner;
  };
  static void release(void* p) {
    auto* ctx = static_cast<Context*>(p);
    ctx->owner->live_.fetch_sub(ctx->bytes);
    delete ctx;  // frees through the wrapped allocator
  }

  c10::Allocator* base_;
  mutable std::atomic<size_t> live_{0};
  mutable std::atomic<size_t> peak_{0};
};

CountingAllocator& counter() {
  // Never destroyed: tensors may outlive static destruction.
  static CountingAllocator* instance = [] {
    auto* a = new CountingAllocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(a, /*priority=*/100);
    return a;
  }();
  return *instance;
}

}  // namespace

size_t peak_cpu_bytes_during(const std::function<void()>& fn) {
  auto& a = counter();
  const size_t base = a.live();
  a.reset_peak();
  fn();
  return a.peak() > base ? a.peak() - base : 0;
}

size_t live_cpu_bytes() {
  return counter().live();
}

}  // namespace flt
