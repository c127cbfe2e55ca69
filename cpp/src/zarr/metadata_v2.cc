// Zarr v2 array metadata (.zarray, .zattrs) into the same ArrayMetadata as v3's zarr.json, so
// the planner and executor read both formats alike (declared in zarr/metadata.h).
//
// A v2 chunk decodes as: compressor, then filters in reverse, then the dtype's byte order,
// then `order` (zarr-format.md §7.3). That is the v3 chain [transpose (F only), bytes(endian),
// compressor], built here as v3 codec JSON and parsed by the one CodecChain parser, so v2 adds
// no decode path of its own: F-order chunks go through the transpose codec's copy, numcodecs'
// zstd and gzip frames are the v3 codecs' frames, and a zlib stream is inflated by the gzip
// codec (it accepts zlib and gzip headers alike).
//
// Supported now: dtypes b1, i1-i8, u1-u8, f2-f8, c8/c16 and fixed-width strings U<n>, S<n>
// (v3's fixed_length_utf32 / null_terminated_bytes) in either byte order; order C/F;
// dimension_separator "." and "/"; every fill_value encoding of those types (null = the
// dtype's zero, as zarr-python 3 reads it); compressors null, zstd, gzip, zlib, blosc (as the
// v3 blosc codec: the same c-blosc frames), lz4 (codec/numcodecs.cc); filters delta and shuffle
// (bytes -> bytes codecs between `bytes` and the compressor, where numcodecs applies them).
// Structured dtypes (numpy descr lists, fields in their own byte order, nested and subarray
// fields) read as opaque records (zarr/dtype.h). Everything else (other filters, object
// (vlen-utf8 is read as v3's "string"), datetime dtypes) fails with kUnimplemented naming it.
#include <optional>
#include <algorithm>
#include <set>
#include <string>

#include "codec/registry.h"
#include "zarr/metadata.h"
#include "zarr/node.h"

namespace lsio {
namespace {

// "<f4" -> ("float32", "little"); "<U3" -> v3's fixed_length_utf32 of 12 bytes, "|S5" ->
// null_terminated_bytes of 5. kUnimplemented for types lsio does not read yet.
Status V2DataType(const nlohmann::json& j, nlohmann::json* name, std::string* endian) {
  if (j.is_array()) {  // a structured dtype: numpy's descr, read by ParseV2StructuredType
    *name = {{"name", "lsio.v2.structured"}, {"configuration", {{"fields", j}}}};
    *endian = "little";  // each field says its own; records are never swapped
    return Status::Ok();
  }
  if (!j.is_string()) return Status::InvalidFormat(".zarray: dtype must be a string, got " + j.dump());
  const std::string s = j.get<std::string>();
  if (s == "|O") {  // object arrays: vlen-utf8 / vlen-bytes / pickled objects
    return Status::Unimplemented("dtype '|O' (variable-length strings or objects) is not supported by lsio yet");
  }
  if (s.size() < 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|')) {
    return Status::InvalidFormat(".zarray: dtype '" + s + "' is not a numpy type string");
  }
  const char kind = s[1];
  const std::string size = s.substr(2);
  if ((kind == 'U' || kind == 'S') && !size.empty() && size.size() < 10 &&
      size.find_first_not_of("0123456789") == std::string::npos && std::stoll(size) > 0) {
    if (kind == 'U' && s[0] == '|') return Status::InvalidFormat(".zarray: dtype '" + s + "' needs a byte order");
    const int64_t n = std::stoll(size) * (kind == 'U' ? 4 : 1);
    *name = {{"name", kind == 'U' ? "fixed_length_utf32" : "null_terminated_bytes"},
             {"configuration", {{"length_bytes", n}}}};
    *endian = s[0] == '>' ? "big" : "little";
    return Status::Ok();
  }
  static const auto& kNames = *new std::set<std::string>{"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4",
                                                         "u8", "f2", "f4", "f8", "c8", "c16"};
  if (!kNames.count(std::string(1, kind) + size)) {
    std::string what = "dtype '" + s + "'";
    if (kind == 'O') what += " (variable-length strings or objects)";
    if (kind == 'M' || kind == 'm') what += " (datetime/timedelta)";
    return Status::Unimplemented(what + " is not supported by lsio yet");
  }
  switch (kind) {
    case 'b': *name = "bool"; break;
    case 'i': *name = "int" + std::to_string(8 * std::stoi(size)); break;
    case 'u': *name = "uint" + std::to_string(8 * std::stoi(size)); break;
    case 'f': *name = "float" + std::to_string(8 * std::stoi(size)); break;
    default: *name = "complex" + std::to_string(8 * std::stoi(size)); break;
  }
  if (s[0] == '|' && size != "1") {
    return Status::InvalidFormat(".zarray: dtype '" + s + "' needs a byte order ('<' or '>')");
  }
  *endian = s[0] == '>' ? "big" : "little";
  return Status::Ok();
}

// c[key] when it is a string, else `otherwise` (nlohmann's value() throws on another type:
// a .zarray is untrusted input).
std::string StringAt(const nlohmann::json& c, const char* key, std::string otherwise = std::string()) {
  if (!c.is_object()) return otherwise;
  auto it = c.find(key);
  return it != c.end() && it->is_string() ? it->get<std::string>() : otherwise;
}

// The compressor as a v3 codec; null when there is none. The configuration carries what the
// .zarray says and nothing else: a key that is null or absent stays out (numcodecs keeps None,
// and decoding needs none of these keys), so no default stands in for it and the v3 codec
// validates only values the writer gave.
// numcodecs' bytes -> bytes codecs that Zarr v2 writes as a compressor or a filter alike
// (checksums, bz2, lzma, shuffle), under v3's numcodecs.* names with their configuration.
std::optional<nlohmann::json> V2BytesCodec(const nlohmann::json& c) {
  static const char* const kIds[] = {"bz2", "lzma", "crc32", "adler32", "fletcher32", "shuffle"};
  const std::string id = StringAt(c, "id");
  for (const char* k : kIds) {
    if (id == k) {
      nlohmann::json config = c;
      config.erase("id");
      return nlohmann::json{{"name", "numcodecs." + id}, {"configuration", config}};
    }
  }
  return std::nullopt;
}

Result<nlohmann::json> V2Compressor(const nlohmann::json& c, size_t typesize) {
  if (c.is_null()) return nlohmann::json();
  if (!c.is_object()) return Status::InvalidFormat(".zarray: compressor must be an object or null");
  auto id = c.find("id");
  if (id == c.end() || !id->is_string()) return Status::InvalidFormat(".zarray: compressor lacks a string \"id\"");
  const std::string name = id->get<std::string>();
  auto given = [&](const char* key) -> const nlohmann::json* {
    auto it = c.find(key);
    return it == c.end() || it->is_null() ? nullptr : &*it;
  };
  auto integer = [&](const char* key, const char* what) -> Result<const nlohmann::json*> {
    const nlohmann::json* v = given(key);
    if (v != nullptr && !v->is_number_integer()) {
      return Status::InvalidFormat(std::string(".zarray: ") + what + " must be an integer or null, got " + v->dump());
    }
    return v;
  };
  nlohmann::json config = nlohmann::json::object();
  if (name == "zstd") {
    // numcodecs writes standard frames; "checksum" (numcodecs >= 0.13) is checked by libzstd
    // from the frame itself, so the flag is informational here.
    LSIO_ASSIGN_OR_RETURN(const nlohmann::json* level, integer("level", "compressor level"));
    if (level != nullptr) config["level"] = *level;
    if (const nlohmann::json* ck = given("checksum")) config["checksum"] = *ck;
    return nlohmann::json{{"name", "zstd"}, {"configuration", config}};
  }
  if (name == "gzip" || name == "zlib") {
    LSIO_ASSIGN_OR_RETURN(const nlohmann::json* level, integer("level", "compressor level"));
    // Only decoded: a level the v3 codec would refuse (zlib's -1 = its default) is left out.
    if (level != nullptr && level->get<int64_t>() >= 0 && level->get<int64_t>() <= 9) config["level"] = *level;
    return nlohmann::json{{"name", "gzip"}, {"configuration", config}};
  }
  if (name == "blosc") {
    // Blosc frames describe themselves (codec, shuffle, typesize); the v3 codec validates
    // the configuration, so it gets v3's spelling of numcodecs' keys.
    if (const nlohmann::json* cname = given("cname")) config["cname"] = *cname;
    LSIO_ASSIGN_OR_RETURN(const nlohmann::json* clevel, integer("clevel", "blosc clevel"));
    if (clevel != nullptr) config["clevel"] = *clevel;
    LSIO_ASSIGN_OR_RETURN(const nlohmann::json* shuffle, integer("shuffle", "blosc shuffle"));
    if (shuffle != nullptr) {
      const int64_t s = shuffle->get<int64_t>();
      // -1 (AUTOSHUFFLE): bit for 1-byte items, byte otherwise; the frame says which was used.
      if (s < -1 || s > 2) return Status::InvalidFormat(".zarray: blosc shuffle must be -1, 0, 1 or 2");
      config["shuffle"] = s == 0 ? "noshuffle" : s == 2 ? "bitshuffle" : "shuffle";
    }
    config["typesize"] = std::max<size_t>(1, typesize);  // what numcodecs compresses with
    LSIO_ASSIGN_OR_RETURN(const nlohmann::json* blocksize, integer("blocksize", "blosc blocksize"));
    if (blocksize != nullptr) config["blocksize"] = *blocksize;
    return nlohmann::json{{"name", "blosc"}, {"configuration", config}};
  }
  if (name == "lz4") {
    if (const nlohmann::json* a = given("acceleration")) config["acceleration"] = *a;
    return nlohmann::json{{"name", "numcodecs.lz4"}, {"configuration", config}};
  }
  if (auto other = V2BytesCodec(c)) return *other;
  return Status::Unimplemented("compressor '" + name + "' is not supported by lsio yet");
}

// A filter as a bytes -> bytes codec (filters see the chunk's bytes in stored byte order).
// Compressors may be filters too: kerchunk writes an HDF5 dataset's filter pipeline (shuffle,
// zlib) as v2 filters with no compressor.
Result<nlohmann::json> V2Filter(const nlohmann::json& f, size_t typesize) {
  if (!f.is_object() || !f.contains("id") || !f["id"].is_string()) {
    return Status::InvalidFormat(".zarray: filters must be objects with a string \"id\", got " + f.dump());
  }
  const std::string id = f["id"].get<std::string>();
  nlohmann::json config = f;
  config.erase("id");
  if (id == "delta" || id == "fixedscaleoffset" || id == "quantize" || id == "bitround") {
    return nlohmann::json{{"name", "lsio.v2." + id}, {"configuration", config}};
  }
  if (auto other = V2BytesCodec(f)) return *other;
  if (id == "zlib" || id == "gzip" || id == "zstd" || id == "blosc" || id == "lz4") return V2Compressor(f, typesize);
  return Status::Unimplemented("filter '" + id + "' is not supported by lsio yet");
}

// The v3 codec list of a v2 array, in encoding order (decoded in reverse): transpose for
// order F, the serializer, the filters, the compressor (null: none).
nlohmann::json V2Codecs(bool order_f, size_t rank, nlohmann::json serializer, std::vector<nlohmann::json> filters,
                        nlohmann::json compressor) {
  nlohmann::json codecs = nlohmann::json::array();
  if (order_f && rank > 1) {
    nlohmann::json perm = nlohmann::json::array();
    for (size_t d = rank; d-- > 0;) perm.push_back(d);
    codecs.push_back({{"name", "transpose"}, {"configuration", {{"order", perm}}}});
  }
  codecs.push_back(std::move(serializer));
  for (auto& f : filters) codecs.push_back(std::move(f));
  if (!compressor.is_null()) codecs.push_back(std::move(compressor));
  return codecs;
}

// A v2 codec lsio cannot run, described as zarr-python 3 names numcodecs codecs in v3 form.
nlohmann::json NumcodecsName(const nlohmann::json& c) {
  if (!c.is_object()) return {{"name", c.dump()}};
  nlohmann::json config = c;
  config.erase("id");
  return {{"name", "numcodecs." + StringAt(c, "id", "unknown")}, {"configuration", config}};
}

bool HasVlenUtf8Filter(const nlohmann::json& j) {
  auto f = j.find("filters");
  if (f == j.end() || !f->is_array()) return false;
  for (const auto& one : *f) {
    if (StringAt(one, "id") == "vlen-utf8") return true;
  }
  return false;
}

// `chunks` with a 0 where the shape is 0 (kerchunk writes that for an empty HDF5 dataset;
// zarr-python reads it as an empty array): 1 there, as any chunk size reads an empty axis.
nlohmann::json V2Chunks(const nlohmann::json& j) {
  nlohmann::json chunks = j.value("chunks", nlohmann::json());
  const nlohmann::json shape = j.value("shape", nlohmann::json());
  if (!chunks.is_array() || !shape.is_array() || chunks.size() != shape.size()) return chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    if (chunks[i].is_number_integer() && chunks[i].get<int64_t>() == 0 && shape[i].is_number_integer() &&
        shape[i].get<int64_t>() == 0) {
      chunks[i] = 1;
    }
  }
  return chunks;
}

}  // namespace

nlohmann::json V2ArrayAsV3(const nlohmann::json& j, const nlohmann::json& attributes) {
  nlohmann::json node = {{"zarr_format", 2}, {"node_type", "array"}, {"attributes", attributes}};
  const nlohmann::json shape = j.value("shape", nlohmann::json::array());
  node["shape"] = shape;
  node["chunk_grid"] = {{"name", "regular"}, {"configuration", {{"chunk_shape", V2Chunks(j)}}}};
  const nlohmann::json dtype = j.value("dtype", nlohmann::json());
  const bool vlen_string = dtype == "|O" && HasVlenUtf8Filter(j);
  nlohmann::json data_type;
  std::string endian = "little";
  size_t itemsize = 1;
  if (vlen_string) {
    data_type = "string";
  } else if (V2DataType(dtype, &data_type, &endian).ok()) {
    if (auto parsed = ParseDataType(data_type); parsed.ok()) itemsize = parsed.value().itemsize;
    if (dtype.is_array()) data_type = dtype;  // a record: described by its descr, as .zarray has it
  } else {
    data_type = dtype.is_string() ? dtype.get<std::string>() : dtype.dump();  // described, not read
  }
  node["data_type"] = data_type;
  const nlohmann::json sep = j.value("dimension_separator", nlohmann::json());
  node["chunk_key_encoding"] = {{"name", "v2"}, {"configuration", {{"separator", sep.is_string() ? sep : "."}}}};
  nlohmann::json fill = j.value("fill_value", nlohmann::json());
  const std::string_view marker = BareNonFiniteMarker();
  if (fill.is_string() && fill.get<std::string>().rfind(marker, 0) == 0) {
    fill = fill.get<std::string>().substr(marker.size());  // a bare NaN token -> v3's "NaN"
  }
  // zarr-python 2.1's `fill_value: 0` on fixed-width strings: their zero (see ParseArrayMetadataV2).
  const std::string type_name = data_type.is_object() ? StringAt(data_type, "name")
                                : data_type.is_string() ? data_type.get<std::string>()
                                                        : std::string();
  if ((type_name == "fixed_length_utf32" || type_name == "null_terminated_bytes") && fill.is_number() && fill == 0) {
    fill = nlohmann::json();
  }
  node["fill_value"] = fill;

  nlohmann::json serializer = vlen_string ? nlohmann::json{{"name", "vlen-utf8"}}
                                          : nlohmann::json{{"name", "bytes"}, {"configuration", {{"endian", endian}}}};
  std::vector<nlohmann::json> filters;
  if (auto f = j.find("filters"); f != j.end() && f->is_array()) {
    for (const auto& one : *f) {
      if (vlen_string && StringAt(one, "id") == "vlen-utf8") continue;  // the serializer
      auto codec = V2Filter(one, itemsize);
      filters.push_back(codec.ok() ? std::move(codec).value() : NumcodecsName(one));
    }
  }
  const nlohmann::json comp = j.value("compressor", nlohmann::json());
  auto compressor = V2Compressor(comp, itemsize);
  const std::string order = StringAt(j, "order", "C");
  node["codecs"] = V2Codecs(order == "F", shape.is_array() ? shape.size() : 0, std::move(serializer),
                            std::move(filters), compressor.ok() ? std::move(compressor).value() : NumcodecsName(comp));
  if (auto dims = attributes.find("_ARRAY_DIMENSIONS"); dims != attributes.end() && dims->is_array()) {
    node["dimension_names"] = *dims;
  }
  return node;
}

Result<ArrayMetadata> ParseArrayMetadataV2(std::string_view zarray, std::string_view zattrs) {
  auto parsed = ParseJsonLenient(zarray);
  if (!parsed.ok()) return Status::InvalidFormat(".zarray is not valid JSON");
  nlohmann::json j = std::move(parsed).value();
  if (!j.is_object()) return Status::InvalidFormat(".zarray must hold a JSON object");
  auto zf = j.find("zarr_format");
  if (zf == j.end() || !zf->is_number_integer() || zf->get<int64_t>() != 2) {
    return Status::InvalidFormat(".zarray: zarr_format must be 2, got " + (zf == j.end() ? std::string("nothing") : zf->dump()));
  }
  for (const char* req : {"shape", "chunks", "dtype", "compressor", "fill_value", "order"}) {
    if (!j.contains(req)) return Status::InvalidFormat(std::string(".zarray lacks \"") + req + "\"");
  }

  nlohmann::json dtype_json;
  std::string endian;
  LSIO_RETURN_IF_ERROR(V2DataType(j["dtype"], &dtype_json, &endian));
  const std::string dtype_name = dtype_json.is_string() ? dtype_json.get<std::string>() : "";
  ArrayMetadata m;
  m.zarr_format = 2;
  LSIO_ASSIGN_OR_RETURN(m.dtype, ParseDataType(dtype_json));
  LSIO_ASSIGN_OR_RETURN(m.shape, ParseArrayShape(j["shape"], "shape", true));
  LSIO_ASSIGN_OR_RETURN(m.chunk_shape, ParseArrayShape(V2Chunks(j), "chunks", false));
  const size_t rank = m.shape.size();
  if (m.chunk_shape.size() != rank) {
    return Status::InvalidFormat(".zarray: chunks has rank " + std::to_string(m.chunk_shape.size()) +
                                 ", shape has rank " + std::to_string(rank));
  }
  LSIO_RETURN_IF_ERROR(CheckArraySize(m.shape, m.dtype.itemsize, "the array"));
  LSIO_RETURN_IF_ERROR(CheckArraySize(m.chunk_shape, m.dtype.itemsize, "a chunk"));
  m.read_chunk_shape = m.chunk_shape;

  // Keys: "i.j" (default) or "i/j"; a 0-d array's one chunk is "0".
  m.key_encoding.v2 = true;
  m.key_encoding.separator = '.';
  if (auto ds = j.find("dimension_separator"); ds != j.end() && !ds->is_null()) {
    if (!ds->is_string() || (ds->get<std::string>() != "." && ds->get<std::string>() != "/")) {
      return Status::InvalidFormat(".zarray: dimension_separator must be \".\" or \"/\", got " + ds->dump());
    }
    m.key_encoding.separator = ds->get<std::string>()[0];
  }

  // fill_value: null leaves missing chunks undefined; zarr-python 3 reads them as the dtype's
  // zero, and so does lsio. The other encodings of these types are v3's (§7.4).
  nlohmann::json fill = j["fill_value"];
  const bool is_string = m.dtype.type == DataType::kFixedUtf32 || m.dtype.type == DataType::kFixedBytes;
  // zarr-python 2.1 wrote `fill_value: 0` for fixed-width string arrays (numpy's zero of the
  // dtype: empty strings); zarr-python 3 refuses it, lsio reads it as that zero.
  if (is_string && fill.is_number() && fill == 0) fill = nlohmann::json();
  // Records: null reads as numpy's cast of 0, as zarr-python 3 fills them; a bare 0 (written
  // by hand, or by zarr-python 2.0/2.1) as zeros, as zarr-python 2 read it (np.zeros of the
  // dtype); zarr-python 3 refuses it.
  if (m.dtype.type == DataType::kStructured && (fill.is_null() || (fill.is_number() && fill == 0))) {
    m.fill_value = fill.is_null() ? m.dtype.zero : std::vector<uint8_t>(m.dtype.itemsize, 0);
    fill = nlohmann::json();
  } else if (fill.is_null()) {
    fill = is_string ? nlohmann::json("")  // zero-filled: an empty string
           : dtype_name == "bool" ? nlohmann::json(false)
           : dtype_name.rfind("complex", 0) == 0 ? nlohmann::json::array({0, 0})
                                                 : nlohmann::json(0);
  }
  const std::string_view marker = BareNonFiniteMarker();
  if (fill.is_string() && fill.get<std::string>().rfind(marker, 0) == 0) {
    fill = fill.get<std::string>().substr(marker.size());  // a bare NaN token -> "NaN"
  }
  if (!fill.is_null()) {
    LSIO_ASSIGN_OR_RETURN(m.fill_value, ParseFillValue(fill, m.dtype));
  }

  const nlohmann::json& order = j["order"];
  if (!order.is_string() || (order.get<std::string>() != "C" && order.get<std::string>() != "F")) {
    return Status::InvalidFormat(".zarray: order must be \"C\" or \"F\", got " + order.dump());
  }
  std::vector<nlohmann::json> filters;  // [] is not conforming; zarr-python 3 treats it as null
  if (auto f = j.find("filters"); f != j.end() && !f->is_null()) {
    if (!f->is_array()) return Status::InvalidFormat(".zarray: filters must be a list or null");
    for (const auto& one : *f) {
      LSIO_ASSIGN_OR_RETURN(nlohmann::json codec, V2Filter(one, m.dtype.itemsize));
      filters.push_back(std::move(codec));
    }
  }

  LSIO_ASSIGN_OR_RETURN(nlohmann::json compressor, V2Compressor(j["compressor"], m.dtype.itemsize));
  const nlohmann::json codecs =
      V2Codecs(order.get<std::string>() == "F", rank, {{"name", "bytes"}, {"configuration", {{"endian", endian}}}},
               std::move(filters), std::move(compressor));

  ChunkSpec spec;
  spec.itemsize = m.dtype.itemsize;
  spec.swap_unit = m.dtype.swap_unit;
  spec.shape = m.read_chunk_shape;
  LSIO_ASSIGN_OR_RETURN(m.chain, ParseCodecChain(codecs, spec));
  std::string description = m.chain->description();
  if (StringAt(j["compressor"], "id") == "zlib") {
    // Stored as zlib, inflated by the gzip codec: say what is stored.
    const size_t at = description.rfind("gzip");
    if (at != std::string::npos) description.replace(at, 4, "zlib");
  }
  m.codecs_description = "v2[" + description + "]";

  // .zattrs (absent = {}); xarray keeps the dimension names in "_ARRAY_DIMENSIONS".
  if (!zattrs.empty()) {
    auto at_parsed = ParseJsonLenient(zattrs);
    if (!at_parsed.ok()) return Status::InvalidFormat(".zattrs is not valid JSON");
    nlohmann::json at = std::move(at_parsed).value();
    if (!at.is_object()) return Status::InvalidFormat(".zattrs must hold a JSON object");
    m.attributes = std::move(at);
  }
  m.attributes_json = RestoreNonFinite(m.attributes.dump());
  if (auto dims = m.attributes.find("_ARRAY_DIMENSIONS"); dims != m.attributes.end() && dims->is_array() &&
                                                          dims->size() == rank) {
    std::vector<std::optional<std::string>> names;
    for (const auto& v : *dims) {
      if (v.is_string()) names.emplace_back(v.get<std::string>());
      else names.emplace_back(std::nullopt);
    }
    m.dimension_names = std::move(names);
  }
  return m;
}

}  // namespace lsio
