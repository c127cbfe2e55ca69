// BufferView: a C-contiguous view of a Python buffer (writable on request), held until
// destruction, so the object cannot be resized or freed while the engine uses it. Used by
// the bindings that take caller buffers (ranges.cc, records.cc).
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "errors.h"

namespace lsio_py {

class BufferView {
 public:
  BufferView(const pybind11::handle& obj, const std::string& what, bool writable) {
    const int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
      PyErr_Clear();
      // Say which property is missing: no buffer at all, a read-only one, or a strided one.
      const bool readable = PyObject_CheckBuffer(obj.ptr()) != 0;
      Py_buffer probe;
      const bool ok = readable && PyObject_GetBuffer(obj.ptr(), &probe, (writable ? PyBUF_WRITABLE : 0) | PyBUF_STRIDES) == 0;
      if (ok) PyBuffer_Release(&probe);
      PyErr_Clear();
      const std::string why = !readable ? "does not support the buffer protocol"
                              : !ok     ? "is read-only"
                                        : "is not C-contiguous";
      ThrowStatus(lsio::Status::InvalidArgument(
          what + " " + why + " (" + std::string(pybind11::str(pybind11::type::of(obj).attr("__name__"))) + ")"));
    }
    held_ = true;
  }
  ~BufferView() {
    if (held_) PyBuffer_Release(&view_);
  }
  BufferView(const BufferView&) = delete;
  BufferView& operator=(const BufferView&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(view_.buf); }
  uint64_t size() const { return static_cast<uint64_t>(view_.len); }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

}  // namespace lsio_py
