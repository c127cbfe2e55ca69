// Status -> Python exception, in one place (see architecture.md §4 for the table).
//
// Usage: `if (!st.ok()) ThrowStatus(st);` inside a binding, with the GIL held. Raises the
// class from lsio.errors that matches the StatusCode (or the builtin for argument misuse);
// pybind11 propagates it to the caller.
#pragma once

#include <utility>

#include "lsio/status.h"

namespace lsio_py {

[[noreturn]] void ThrowStatus(const lsio::Status& st);

/// The value of `r`, or its status raised as ThrowStatus does.
template <typename T>
T Value(lsio::Result<T> r) {
  if (!r.ok()) ThrowStatus(r.status());
  return std::move(r).value();
}

}  // namespace lsio_py
