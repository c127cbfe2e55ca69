// Status -> Python exception mapping. The lsio-specific classes live in python/lsio/errors.py
// so users can catch them as lsio.Error, as the specific class, or as the builtin base.
#include "errors.h"

#include <cerrno>

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace lsio_py {

[[noreturn]] void ThrowStatus(const lsio::Status& st) {
  using lsio::StatusCode;
  if (st.code() == StatusCode::kCancelled) {
    // A Python signal handler raised (KeyboardInterrupt for Ctrl-C): propagate that. A
    // remote read stopped by the interrupt probe (module.cc) left SIGINT pending: run the
    // handlers now, so the exception is the handler's own and is raised once.
    if (PyErr_Occurred() == nullptr && PyErr_CheckSignals() == 0 && PyErr_Occurred() == nullptr) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
    }
    throw py::error_already_set();
  }
  const std::string msg = st.ToString();
  PyObject* builtin = nullptr;
  const char* lsio_class = nullptr;
  switch (st.code()) {
    case StatusCode::kInvalidArgument: builtin = PyExc_ValueError; break;
    case StatusCode::kInvalidType: builtin = PyExc_TypeError; break;
    case StatusCode::kResourceExhausted: builtin = PyExc_MemoryError; break;
    case StatusCode::kInvalidFormat: lsio_class = "FormatError"; break;
    case StatusCode::kUnimplemented: lsio_class = "UnsupportedError"; break;
    case StatusCode::kDataLoss: lsio_class = "CorruptDataError"; break;
    case StatusCode::kIoError:
    case StatusCode::kUnavailable: lsio_class = "StorageError"; break;
    case StatusCode::kOutOfRange: lsio_class = "BoundsError"; break;
    case StatusCode::kOk:
    case StatusCode::kInternal:
    default: builtin = PyExc_RuntimeError; break;
  }
  if (builtin != nullptr) {
    PyErr_SetString(builtin, msg.c_str());
    throw py::error_already_set();
  }
  // A missing file or object is also a FileNotFoundError, a refused one a PermissionError
  // (python/lsio/errors.py), as zarr-python and xarray raise them.
  if (std::string(lsio_class) == "StorageError") {
    if (st.error_number() == ENOENT) lsio_class = "NotFoundError";
    else if (st.error_number() == EACCES || st.error_number() == EPERM) lsio_class = "PermissionDeniedError";
  }
  py::object cls = py::module_::import("lsio.errors").attr(lsio_class);
  py::object exc;
  if (PyObject_IsSubclass(cls.ptr(), PyExc_OSError) == 1) {
    // OSError(errno, strerror, filename): errno and filename become attributes.
    // OSError(errno, strerror): str() shows "[Errno N] strerror"; filename set separately so
    // the message is not repeated.
    // Without an errno, OSError's str() would print "[Errno None] None: filename" once a
    // filename is set: then the message (which names the object) stays the whole text.
    if (st.error_number() != 0) {
      exc = cls(st.error_number(), st.ToString(/*include_errno=*/false));
      if (!st.path().empty()) exc.attr("filename") = st.path();
    } else {
      exc = cls(msg);
    }
  } else {
    exc = cls(msg);
  }
  if (!st.path().empty()) exc.attr("path") = st.path();
  if (!st.chunk().empty()) exc.attr("chunk") = st.chunk();
  if (st.has_range()) exc.attr("byte_range") = py::make_tuple(st.range_offset(), st.range_offset() + st.range_length());
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

}  // namespace lsio_py
