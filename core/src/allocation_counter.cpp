#include "flt/detail/allocation_counter.h"

#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace flt {
namespace {

// Wraps the default CPU allocator. Its DataPtrs carry the data pointer as their context (as the
// default allocator's do): c10::Allocator::raw_allocate, which some LibTorch CPU ops use for
// scratch buffers, asserts get() == get_context(). The wrapped allocation and its size are kept in
// a table keyed by the data pointer until release.
class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  // LibTorch up to 2.2 declares allocate const; 2.3 made it non-const and added the pure virtual
  // copy_data. Both allocate signatures and copy_data are defined, without `override`, so each
  // version finds the ones it declares (no version macro).
  c10::DataPtr allocate(size_t bytes) { return std::as_const(*this).allocate(bytes); }
  c10::DataPtr allocate(size_t bytes) const {
    auto inner = base_->allocate(bytes);
    void* data = inner.get();
    if (data == nullptr) return inner;  // zero bytes: nothing to count
    {
      std::lock_guard<std::mutex> lock(mutex_);
      blocks_.emplace(data, Block{std::move(inner), bytes});
    }
    const size_t now = live_.fetch_add(bytes) + bytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  void copy_data(void* dest, const void* src, size_t count) const {
    std::memcpy(dest, src, count);  // CPU memory
  }

  void reset_peak() const { peak_.store(live_.load()); }
  size_t live() const { return live_.load(); }
  size_t peak() const { return peak_.load(); }

 private:
  struct Block {
    c10::DataPtr inner;
    size_t bytes = 0;
  };
  static void release(void* data);

  c10::Allocator* base_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<void*, Block> blocks_;
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

void CountingAllocator::release(void* data) {
  auto& self = counter();
  Block block;
  {
    std::lock_guard<std::mutex> lock(self.mutex_);
    auto it = self.blocks_.find(data);
    if (it == self.blocks_.end()) return;  // not ours (cannot happen: only we hand out release)
    block = std::move(it->second);
    self.blocks_.erase(it);
  }
  self.live_.fetch_sub(block.bytes);
  // block.inner frees through the wrapped allocator as it goes out of scope, outside the lock.
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
