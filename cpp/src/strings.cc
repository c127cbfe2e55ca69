// Variable-length string arrays (lsio/strings.h): metadata checked at open, chunks read whole
// through the store, the bytes -> bytes codecs from the registry run in reverse with growable
// buffers, then the vlen-utf8 layout.
#include "lsio/strings.h"

#include <cstring>
#include <memory>

#include "codec/registry.h"
#include "store/local_store.h"
#include "util/utf8.h"
#include "zarr/chunk_key.h"
#include "zarr/metadata.h"

namespace lsio {
namespace {

constexpr uint64_t kMaxDecodedBytes = 1ull << 30;

uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

// The bytes -> bytes codecs after vlen-utf8, from their JSON list.
Result<std::vector<std::unique_ptr<Codec>>> ParseStringCodecs(const std::string& codecs_json) {
  nlohmann::json list = nlohmann::json::parse(codecs_json, nullptr, /*allow_exceptions=*/false);
  if (list.is_discarded() || !list.is_array()) return Status::InvalidFormat("codecs must be a JSON list");
  std::vector<std::unique_ptr<Codec>> codecs;
  for (const auto& element : list) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(element));
    if (c->kind() != CodecKind::kBytesToBytes) {
      return Status::Unimplemented("codec '" + c->name() + "' after vlen-utf8 is not supported by lsio");
    }
    codecs.push_back(std::move(c));
  }
  return codecs;
}

}  // namespace

Result<std::vector<std::string>> DecodeVlenUtf8Chunk(const std::string& codecs_json, std::string_view stored,
                                                     uint64_t items) {
  LSIO_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Codec>> codecs, ParseStringCodecs(codecs_json));
  // Decode in reverse, each stage into its own growable buffer.
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(stored.data()), stored.size());
  AlignedBuffer buffers[2];
  DecodeScratch& scratch = ThreadDecodeScratch();
  for (size_t k = codecs.size(); k-- > 0;) {
    BytesOut out;
    out.grow = &buffers[k % 2];
    // A string chunk's decoded size is unknown up front; a frame claiming more than this is
    // taken as corrupt rather than allocated.
    out.limit = kMaxDecodedBytes;
    LSIO_RETURN_IF_ERROR(static_cast<const BytesToBytesCodec&>(*codecs[k]).DecodeBytes(bytes, out, scratch));
    bytes = out.result;
  }
  if (bytes.size() < 4) return Status::DataLoss("vlen-utf8: chunk shorter than its 4-byte item count");
  const uint64_t count = Le32(bytes.data());
  if (count != items) {
    return Status::DataLoss("vlen-utf8: chunk holds " + std::to_string(count) + " items, expected " +
                            std::to_string(items));
  }
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(count));
  size_t at = 4;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - at < 4) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " runs past the chunk");
    const uint64_t n = Le32(bytes.data() + at);
    at += 4;
    if (bytes.size() - at < n) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " runs past the chunk");
    std::string_view s(reinterpret_cast<const char*>(bytes.data() + at), static_cast<size_t>(n));
    if (!ValidUtf8(s)) return Status::DataLoss("vlen-utf8: item " + std::to_string(i) + " is not valid UTF-8");
    out.emplace_back(s);
    at += static_cast<size_t>(n);
  }
  if (at != bytes.size()) {
    return Status::DataLoss("vlen-utf8: " + std::to_string(bytes.size() - at) + " bytes after the last item");
  }
  return out;
}

namespace {

std::string CodecName(const nlohmann::json& c) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_object() && c.contains("name") && c["name"].is_string()) return c["name"].get<std::string>();
  return c.dump();
}

std::string Coords(const std::vector<int64_t>& coords) {
  std::string s = "(";
  for (size_t d = 0; d < coords.size(); ++d) s += (d ? ", " : "") + std::to_string(coords[d]);
  return s + (coords.size() == 1 ? ",)" : ")");
}

// Chunks larger than this many items are refused at open: each item is a std::string.
constexpr int64_t kMaxChunkItems = int64_t{1} << 31;

}  // namespace

StringArray::~StringArray() = default;

Result<std::unique_ptr<StringArray>> StringArray::Open(const std::string& dir, const nlohmann::json& metadata,
                                                       const std::string& metadata_location) {
  return Open(std::make_shared<LocalStore>(dir), metadata, metadata_location);
}

Result<std::unique_ptr<StringArray>> StringArray::Open(std::shared_ptr<Store> store, const nlohmann::json& m,
                                                       const std::string& metadata_location) {
  auto fail = [&](Status st) { return st.WithPath(metadata_location); };
  if (!m.is_object() || m.value("data_type", nlohmann::json()) != "string") {
    return fail(Status::InvalidFormat("not a variable-length string array"));
  }
  std::unique_ptr<StringArray> a(new StringArray());
  a->store_ = std::move(store);
  auto shape = ParseArrayShape(m.value("shape", nlohmann::json()), "shape", true);
  if (!shape.ok()) return fail(shape.status());
  a->shape_ = std::move(shape).value();
  const nlohmann::json grid = m.value("chunk_grid", nlohmann::json::object());
  if (!grid.is_object() || grid.value("name", nlohmann::json()) != "regular") {
    return fail(Status::Unimplemented("chunk grid " + (grid.is_object() ? grid.value("name", nlohmann::json()).dump() : grid.dump()) +
                                      " is not supported by lsio"));
  }
  auto chunks = ParseArrayShape(grid.value("configuration", nlohmann::json::object()).value("chunk_shape", nlohmann::json()),
                                "chunk_shape", false);
  if (!chunks.ok()) return fail(chunks.status());
  a->chunks_ = std::move(chunks).value();
  if (a->chunks_.size() != a->shape_.size()) {
    return fail(Status::InvalidFormat("chunks " + nlohmann::json(a->chunks_).dump() + " do not fit shape " +
                                      nlohmann::json(a->shape_).dump()));
  }
  int64_t items = 1;
  for (int64_t c : a->chunks_) {
    if (c > kMaxChunkItems / items) return fail(Status::InvalidFormat("a chunk of more than 2^31 strings"));
    items *= c;
  }
  auto enc = ParseChunkKeyEncoding(m.value("chunk_key_encoding", nlohmann::json{{"name", "default"}}));
  if (!enc.ok()) return fail(enc.status());
  a->v2_keys_ = enc.value().v2;
  a->separator_ = enc.value().separator;

  const nlohmann::json codecs = m.value("codecs", nlohmann::json::array());
  if (!codecs.is_array()) return fail(Status::InvalidFormat("codecs must be a list"));
  std::vector<std::string> names;
  for (const auto& c : codecs) names.push_back(CodecName(c));
  size_t at = 0;
  if (at < codecs.size() && names[at] == "transpose") {
    // zarr-format.md §7: a v2 order "F" chunk holds its items in column-major order.
    const nlohmann::json order = codecs[at].value("configuration", nlohmann::json::object()).value("order", nlohmann::json());
    std::vector<bool> seen(a->shape_.size(), false);
    if (!order.is_array() || order.size() != a->shape_.size()) return fail(Status::InvalidFormat("transpose: bad order"));
    for (const auto& d : order) {
      if (!d.is_number_unsigned() || d.get<size_t>() >= seen.size() || seen[d.get<size_t>()]) {
        return fail(Status::InvalidFormat("transpose: bad order " + order.dump()));
      }
      seen[d.get<size_t>()] = true;
      a->order_.push_back(d.get<size_t>());
    }
    ++at;
  }
  if (at >= codecs.size() || names[at] != "vlen-utf8") {
    for (const std::string& n : names) {
      if (n == "sharding_indexed") {
        return fail(Status::Unimplemented("sharded variable-length strings are not supported by lsio yet"));
      }
    }
    return fail(Status::Unimplemented("string array with codecs " + nlohmann::json(names).dump() +
                                      ": lsio reads vlen-utf8 strings"));
  }
  nlohmann::json rest = nlohmann::json::array();
  for (size_t k = at + 1; k < codecs.size(); ++k) {
    rest.push_back(codecs[k]);
    a->codec_names_.push_back(names[k]);
  }
  a->codecs_json_ = rest.dump();
  // Every codec parsed now, so that one lsio cannot run fails the open, not the first read.
  if (auto parsed = ParseStringCodecs(a->codecs_json_); !parsed.ok()) return fail(parsed.status());
  const nlohmann::json fill = m.value("fill_value", nlohmann::json());
  a->fill_ = fill.is_null() ? std::string() : fill.is_string() ? fill.get<std::string>() : fill.dump();
  return a;
}

std::string StringArray::codecs_description() const {
  std::string s = "vlen-utf8";
  if (codec_names_.empty()) return s;
  s += "[";
  for (size_t k = 0; k < codec_names_.size(); ++k) s += (k ? ", " : "") + codec_names_[k];
  return s + "]";
}

std::string StringArray::ChunkKey(const std::vector<int64_t>& coords) const {
  ChunkKeyEncoding enc;
  enc.v2 = v2_keys_;
  enc.separator = separator_;
  return lsio::ChunkKey(enc, coords.data(), static_cast<int>(coords.size()));
}

std::string StringArray::Location(const std::string& key) const { return store_->Location(key); }

Result<std::optional<std::vector<std::string>>> StringArray::ReadChunk(const std::vector<int64_t>& coords) const {
  if (coords.size() != shape_.size()) return Status::InvalidArgument("chunk coordinates of the wrong rank");
  for (size_t d = 0; d < coords.size(); ++d) {
    if (coords[d] < 0 || coords[d] * chunks_[d] >= std::max<int64_t>(shape_[d], 1)) {
      return Status::OutOfRange("chunk " + Coords(coords) + " is outside the grid");
    }
  }
  const std::string key = ChunkKey(coords);
  auto stored = store_->ReadAll(key, kMaxDecodedBytes);
  if (!stored.ok()) return Status(stored.status()).WithChunk(Coords(coords));
  if (!stored.value().has_value()) return std::optional<std::vector<std::string>>();
  uint64_t n = 1;
  for (int64_t c : chunks_) n *= static_cast<uint64_t>(c);
  auto items = DecodeVlenUtf8Chunk(codecs_json_, *stored.value(), n);
  if (!items.ok()) {
    return Status(items.status()).WithPath(Location(key)).WithChunk(Coords(coords)).WithRange(0, stored.value()->size());
  }
  if (order_.empty()) return std::optional<std::vector<std::string>>(std::move(items).value());
  // Stored in the transposed chunk's C order: stored dim k is chunk dim order_[k].
  const size_t rank = chunks_.size();
  std::vector<int64_t> strides(rank, 1);  // C strides of the chunk
  for (size_t d = rank; d-- > 1;) strides[d - 1] = strides[d] * chunks_[d];
  std::vector<std::string> out(n);
  std::vector<int64_t> t(rank, 0);  // position in the transposed chunk
  for (uint64_t i = 0; i < n; ++i) {
    int64_t dst = 0;
    for (size_t k = 0; k < rank; ++k) dst += t[k] * strides[order_[k]];
    out[static_cast<size_t>(dst)] = std::move(items.value()[i]);
    for (size_t k = rank; k-- > 0;) {
      if (++t[k] < chunks_[order_[k]]) break;
      t[k] = 0;
    }
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

}  // namespace lsio
