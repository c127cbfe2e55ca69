// Zarr v3 core data types and fill values.
//
// Usage:
//   LSIO_ASSIGN_OR_RETURN(DataTypeInfo dt, ParseDataType(json["data_type"]));
//   LSIO_ASSIGN_OR_RETURN(std::vector<uint8_t> fill, ParseFillValue(json["fill_value"], dt));
// `fill` holds one element in native byte order, ready to be repeated into outputs.
//
// Supported: bool, int8..int64, uint8..uint64, float16/32/64, complex64/128. Fill values in
// every form the spec allows: integers (64-bit exact), numbers, "NaN", "Infinity",
// "-Infinity", "0x..." bit patterns (1..2*itemsize hex digits, bit-cast to the array's type;
// also per component of complex values), [re, im] pairs. Integral floats are accepted for
// integer types (zarr-python >= 3.1.3 reads them). Fixed-width strings as zarr-python 3 names
// them, {"name": "fixed_length_utf32" | "null_terminated_bytes", "configuration":
// {"length_bytes": n}}, with string fill values (utf32: the text; bytes: base64). Structured
// (record) types as zarr-python 3 names them, {"name": "structured", "configuration":
// {"fields": [[name, data_type], ...]}} (fields little-endian, packed; numpy.datetime64,
// numpy.timedelta64 and raw_bytes fields copied as stored), and Zarr v2's numpy
// descr lists through ParseV2StructuredType (fields in their own byte order, subarray fields);
// their fill value is the base64 of one element. HDF5 compounds come as lsio's own
// {"name": "lsio.hdf5.compound", "configuration": numpy's dict form (names, formats, offsets,
// itemsize)}, padding kept (python/lsio/_hdf5.py). Other extension types (variable-length
// "string", datetime, r<N>) fail with kUnimplemented naming the type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lsio/status.h"

namespace lsio {

enum class DataType {
  kBool, kInt8, kInt16, kInt32, kInt64, kUInt8, kUInt16, kUInt32, kUInt64,
  kFloat16, kFloat32, kFloat64, kComplex64, kComplex128,
  // Fixed-width strings: opaque elements to the engine (copied, never converted).
  kFixedUtf32,  ///< "fixed_length_utf32" (numpy <U N): N UTF-32 code units, zero-padded
  kFixedBytes,  ///< "null_terminated_bytes" (numpy |S N): N bytes, zero-padded
  // Records: opaque elements too. Each field keeps the byte order it is stored in, and the
  // output's numpy dtype says which (`descr`), so nothing is ever swapped.
  kStructured,
};

struct DataTypeInfo {
  DataType type = DataType::kUInt8;
  std::string name;       ///< Zarr name, e.g. "float32"
  std::string typestr;    ///< numpy type string in host (little-endian) order, e.g. "<f4"
  size_t itemsize = 1;
  size_t swap_unit = 1;   ///< component size for byte swapping (1 = never swapped)
  /// Structured types only: the numpy dtype as a JSON descr, fields in storage order with
  /// their byte order, e.g. [["a","<i4"],["b",">f8",[2]],["c",[["x","|S2"]]]], or for HDF5
  /// compounds numpy's dict form ({"names", "formats", "offsets", "itemsize"}, a subarray
  /// format as {"subarray", "shape"}); np.dtype() of it (lists made tuples) is the output
  /// dtype. Empty otherwise.
  std::string descr;
  /// Structured types only: numpy's cast of 0 to the type (zeros, "0" in string fields), the
  /// element zarr-python 3 fills a v2 array with when its fill_value is null. Empty otherwise
  /// (meaning zeros).
  std::vector<uint8_t> zero;
};

Result<DataTypeInfo> ParseDataType(const nlohmann::json& j);

/// A Zarr v2 structured dtype: the .zarray's list of [name, typestr] / [name, typestr, shape]
/// / [name, [fields...]] entries, numpy's descr. Leaf typestrs b1, i/u 1-8, f2-f8, c8/c16,
/// S<n>, U<n>, V<n>, M8[unit], m8[unit] in either byte order. An empty name is numpy's
/// padding field, named "f<index>" as numpy names it.
Result<DataTypeInfo> ParseV2StructuredType(const nlohmann::json& fields);

Result<std::vector<uint8_t>> ParseFillValue(const nlohmann::json& j, const DataTypeInfo& dt);

}  // namespace lsio
