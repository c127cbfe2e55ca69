// Shared by the bindings that open arrays (array.cc, remote.cc): a node's metadata files as
// _core.read_node returned them, back into C++ (lsio::Array::Open takes them instead of
// reading them again).
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <vector>

#include "lsio/node.h"

namespace lsio_py {

/// None -> nullopt; else the "files" list of a read_node dict ({"key", "location", "text"}).
std::optional<std::vector<lsio::NodeFile>> NodeFilesFrom(const pybind11::object& files);

}  // namespace lsio_py
