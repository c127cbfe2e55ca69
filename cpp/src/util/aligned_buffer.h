// AlignedBuffer: a growable byte buffer with a fixed alignment, reused across calls.
// Page-aligned, so it can also take O_DIRECT reads.
//
// Usage: keep one per thread (in a ProcessLocal or thread-local scratch), call Reserve(n)
// before each use; memory is only reallocated when n grows past the capacity, so the hot
// path does not allocate. Contents are not preserved across a growing Reserve().
// Not thread-safe: one owner at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace lsio {

class AlignedBuffer {
 public:
  static constexpr size_t kAlignment = 4096;

  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept : data_(o.data_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.capacity_ = 0;
  }
  ~AlignedBuffer() { std::free(data_); }

  /// Ensures capacity >= n. Returns false (buffer unchanged) if allocation fails.
  bool Reserve(size_t n) {
    if (n <= capacity_) return true;
    size_t cap = capacity_ == 0 ? 4096 : capacity_;
    while (cap < n) cap = cap * 2 < cap ? n : cap * 2;
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, cap) != 0) return false;
    std::free(data_);
    data_ = static_cast<uint8_t*>(p);
    capacity_ = cap;
    return true;
  }

  /// Frees the memory if the capacity exceeds `keep` bytes (a one-off large call should not
  /// pin its buffers for the life of the thread).
  void Trim(size_t keep) {
    if (capacity_ <= keep) return;
    std::free(data_);
    data_ = nullptr;
    capacity_ = 0;
  }

  uint8_t* data() { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  uint8_t* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace lsio
