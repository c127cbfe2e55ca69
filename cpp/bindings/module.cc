// The _core extension module: the only place (with array.cc and errors.cc) that knows
// Python exists. python/lsio wraps it; users never import _core directly.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "gil.h"
#include "lsio/array.h"

namespace py = pybind11;

namespace lsio_py {

// The engine's interrupt probe (lsio::SetInterruptProbe): whether SIGINT is pending, without
// running a handler (a remote read calls it while its buffers are live). Python offers no
// "is it tripped?" query, so take the flag and trip it again: the handlers run later, once,
// at the engine's next `interrupted` poll or when the kCancelled status is raised.
bool SigintPending() {
  if (PythonFinalizing()) return false;
  PyGILState_STATE g = PyGILState_Ensure();
  const bool pending = PyOS_InterruptOccurred() != 0;
  if (pending) PyErr_SetInterrupt();
  PyGILState_Release(g);
  return pending;
}

void BindArray(py::module_& m);
void BindLimits(py::module_& m);  // limits.cc: private micro-benchmarks for benchmarks/python
void BindRemote(py::module_& m);  // remote.cc: remote stores (S3, GCS, HTTP)
void BindRanges(py::module_& m);  // ranges.cc: byte-range reads (read_ranges)
void BindRecords(py::module_& m);  // records.cc: zrecord stores (lsio.records)
void BindNode(py::module_& m);    // node.cc: node metadata (read_node), StringArray
void BindManifest(py::module_& m);  // manifest.cc: kerchunk references
}  // namespace lsio_py

PYBIND11_MODULE(_core, m) {
  m.doc() = "lsio native engine (internal; use the lsio package)";
  // pybind11 looks numpy's C API up on first use, releasing the GIL with a
  // gil_scoped_release while it does (gil_safe_call_once_and_store). Were that first use a
  // read on a daemon thread as the interpreter exits, re-taking the GIL in that destructor
  // would end the thread inside it: std::terminate. So look it up now, at import.
  (void)py::isinstance<py::array>(py::none());
  lsio_py::BindRemote(m);  // first: open_remote returns an Array, RemoteStore is its argument
  lsio_py::BindArray(m);
  lsio_py::BindLimits(m);
  lsio_py::BindRanges(m);
  lsio_py::BindRecords(m);
  lsio_py::BindNode(m);
  lsio_py::BindManifest(m);
  lsio::SetInterruptProbe(&lsio_py::SigintPending);
  m.def("io_backend_info", [] {
    const lsio::IoBackendInfo i = lsio::GetIoBackendInfo();
    py::dict d;
    d["auto"] = i.auto_backend;
    d["uring_available"] = i.uring_available;
    d["reason"] = i.reason;
    return d;
  });
}
