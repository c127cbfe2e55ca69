// WithoutGil: run engine work with the GIL released, safely at interpreter exit and under
// Python signal handlers. Use it instead of py::gil_scoped_release around engine calls.
//
// Usage (GIL held):
//   lsio::Status st = WithoutGil([&](const std::function<bool()>& interrupted) {
//     return arr.ReadBatch(sels, views, interrupted);   // engine polls `interrupted`
//   });
//   auto r = WithoutGil([&] { return lsio::Array::Open(path, options); });  // no polling
//
// Why not py::gil_scoped_release:
//   1. It re-takes the GIL in a destructor. When the interpreter is finalizing, taking the
//      GIL ends a daemon thread with pthread_exit, whose forced unwind cannot pass a
//      (noexcept) destructor: std::terminate, "terminate called without an active
//      exception" (pybind11 #2215). Here the GIL is re-taken by a plain call once the engine
//      has returned, so the unwind passes only frames holding no engine state, and
//      pybind11's dispatcher lets abi::__forced_unwind through. The thread then ends as any
//      Python daemon thread does.
//   2. Ctrl-C: the engine asks `interrupted` on the calling thread, between batches of
//      work, where it holds no per-thread buffers; the callback takes the GIL and runs
//      Python's signal handlers (which may themselves read through lsio). The exception a
//      handler raised stays set and is re-raised by ThrowStatus. Once the interpreter is
//      finalizing the callback answers "no" without touching the GIL, so the engine runs
//      to completion and the thread ends in step 1.
//
// Exceptions thrown by `fn` (bad_alloc from the bindings' own containers) propagate with
// the GIL re-taken; the forced unwind of a dying thread propagates untouched.
#pragma once

#include <Python.h>
#include <cxxabi.h>

#include <functional>
#include <type_traits>

namespace lsio_py {

/// True once the interpreter has begun finalizing (taking the GIL would end this thread).
inline bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

template <typename Fn>
auto WithoutGil(Fn&& fn) {
  PyThreadState* const state = PyEval_SaveThread();
  try {
    if constexpr (std::is_invocable_v<Fn&, const std::function<bool()>&>) {
      const std::function<bool()> interrupted = [state] {
        if (PythonFinalizing()) return false;
        PyEval_RestoreThread(state);
        const bool raised = PyErr_CheckSignals() != 0;
        PyEval_SaveThread();
        return raised;
      };
      auto result = fn(interrupted);
      PyEval_RestoreThread(state);
      return result;
    } else {
      auto result = fn();
      PyEval_RestoreThread(state);
      return result;
    }
  } catch (abi::__forced_unwind&) {
    throw;  // the thread is being ended (pthread_exit): never take the GIL on the way out
  } catch (...) {
    PyEval_RestoreThread(state);
    throw;
  }
}

}  // namespace lsio_py
