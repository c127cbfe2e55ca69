// zarr.json parsing and validation.
#include "zarr/metadata.h"

#include <set>

#include "codec/registry.h"
#include "zarr/sharding_config.h"

namespace lsio {
namespace {

// The marker as it appears inside a JSON string literal, and once decoded.
constexpr std::string_view kBareMarkerJson = "\\u0001lsio-bare:";
constexpr std::string_view kBareMarker = "\x01lsio-bare:";

// Replaces marker strings in nlohmann's dump by the original bare tokens, which Python's
// json module reads as floats again.
std::string RestoreBareNonFinite(std::string dumped) {
  const std::string quoted = "\"" + std::string(kBareMarkerJson);
  size_t pos = 0;
  while ((pos = dumped.find(quoted, pos)) != std::string::npos) {
    const size_t tok = pos + quoted.size();
    const size_t end = dumped.find('"', tok);
    if (end == std::string::npos) break;
    const std::string name = dumped.substr(tok, end - tok);
    dumped.replace(pos, end + 1 - pos, name);
    pos += name.size();
  }
  return dumped;
}

// Replaces bare NaN, Infinity and -Infinity tokens outside strings by marker strings, so
// RFC 8259 parsers accept metadata written by tools that emit them (zarr-python writes
// float attributes that way). The markers cannot occur in real strings (they start with a
// control character, which JSON strings must escape) and are mapped back by
// BareNonFiniteName (fill values) and ArrayMetadata::attributes_json (attributes).
std::string QuoteBareNonFinite(std::string_view in) {
  std::string out;
  out.reserve(in.size() + 16);
  bool in_string = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < in.size()) out += in[++i];
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
      out += c;
      continue;
    }
    bool replaced = false;
    for (std::string_view tok : {std::string_view("-Infinity"), std::string_view("Infinity"),
                                 std::string_view("NaN")}) {
      if (in.substr(i, tok.size()) == tok) {
        out += '"';
        out += kBareMarkerJson;
        out += tok;
        out += '"';
        i += tok.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

Result<std::vector<int64_t>> ParseShape(const nlohmann::json& j, const char* what, bool allow_zero) {
  if (!j.is_array()) return Status::InvalidFormat(std::string(what) + " must be a list of integers");
  std::vector<int64_t> out;
  for (const auto& v : j) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > (1ull << 62))) {
      return Status::InvalidFormat(std::string(what) + " must hold integers, got " + v.dump());
    }
    const int64_t x = v.get<int64_t>();
    if (x < (allow_zero ? 0 : 1)) {
      return Status::InvalidFormat(std::string(what) + " entries must be " + (allow_zero ? ">= 0" : ">= 1") +
                                   ", got " + std::to_string(x));
    }
    out.push_back(x);
  }
  return out;
}

// Product of the shape times itemsize must fit in int64 (numpy's limit, and ours).
// A transpose codec's "order" as a permutation of 0..nd-1 ("C": identity, "F": reversal).
Result<std::vector<int>> TransposeOrder(const nlohmann::json& config, size_t nd) {
  auto it = config.find("order");
  std::vector<int> order;
  if (it != config.end() && it->is_string() && (*it == "C" || *it == "F")) {
    for (size_t k = 0; k < nd; ++k) order.push_back(static_cast<int>(*it == "C" ? k : nd - 1 - k));
    return order;
  }
  if (it == config.end() || !it->is_array() || it->size() != nd) {
    return Status::InvalidFormat("transpose codec: \"order\" must list every dimension once");
  }
  std::vector<bool> seen(nd, false);
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= static_cast<int64_t>(nd) ||
        seen[static_cast<size_t>(v.get<int64_t>())]) {
      return Status::InvalidFormat("transpose codec: \"order\" is not a permutation of 0..n-1");
    }
    seen[static_cast<size_t>(v.get<int64_t>())] = true;
    order.push_back(static_cast<int>(v.get<int64_t>()));
  }
  return order;
}

Status CheckSize(const std::vector<int64_t>& shape, size_t itemsize, const char* what) {
  __int128 n = static_cast<__int128>(itemsize);
  for (int64_t s : shape) {
    n *= s;
    if (n > static_cast<__int128>(INT64_MAX)) {
      return Status::InvalidFormat(std::string(what) + " is too large (more than 2^63 bytes)");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<nlohmann::json> ParseJsonLenient(std::string_view text) {
  // Metadata nests a few levels; nlohmann's dump() and comparisons recurse, so a hostile file
  // nested 100,000 levels deep would overflow the stack. Deeper values are discarded while
  // parsing, and the document refused.
  constexpr int kMaxDepth = 256;
  bool deep = false;
  auto depth_check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if (depth > kMaxDepth && (event == nlohmann::json::parse_event_t::object_start ||
                              event == nlohmann::json::parse_event_t::array_start)) {
      deep = true;
      return false;
    }
    return true;
  };
  nlohmann::json j = nlohmann::json::parse(text, depth_check, /*allow_exceptions=*/false);
  if (j.is_discarded() && !deep) {
    j = nlohmann::json::parse(QuoteBareNonFinite(text), depth_check, false);
  }
  if (deep) return Status::InvalidFormat("metadata JSON is nested deeper than 256 levels");
  if (j.is_discarded()) return Status::InvalidFormat("zarr.json is not valid JSON");
  return j;
}

Result<ArrayMetadata> ParseArrayMetadata(std::string_view text) {
  LSIO_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonLenient(text));
  if (!j.is_object()) return Status::InvalidFormat("zarr.json must hold a JSON object");

  auto zf = j.find("zarr_format");
  if (zf == j.end()) return Status::InvalidFormat("zarr.json lacks \"zarr_format\"");
  if (!zf->is_number_integer() || zf->get<int64_t>() != 3) {
    if (zf->is_number_integer() && zf->get<int64_t>() == 2) {
      return Status::InvalidFormat("zarr.json says zarr_format 2: a Zarr v2 array keeps its metadata in .zarray");
    }
    return Status::InvalidFormat("zarr_format must be 3, got " + zf->dump());
  }
  auto nt = j.find("node_type");
  if (nt == j.end() || !nt->is_string()) return Status::InvalidFormat("zarr.json lacks \"node_type\"");
  if (nt->get<std::string>() != "array") {
    return Status::InvalidFormat("node_type is '" + nt->get<std::string>() + "', expected 'array'");
  }

  // Never destroyed (a daemon thread may still parse while the process exits).
  static const auto& kKnown = *new std::set<std::string>{
      "zarr_format", "node_type", "shape", "data_type", "chunk_grid", "chunk_key_encoding",
      "fill_value", "codecs", "attributes", "storage_transformers", "dimension_names"};
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (kKnown.count(it.key())) continue;
    const auto& v = it.value();
    auto mu = v.is_object() ? v.find("must_understand") : v.end();
    if (v.is_object() && mu != v.end() && mu->is_boolean() && !mu->get<bool>()) continue;
    return Status::InvalidFormat("unknown metadata key '" + it.key() +
                                 "' that must be understood (no \"must_understand\": false)");
  }

  for (const char* req : {"shape", "data_type", "chunk_grid", "chunk_key_encoding", "fill_value", "codecs"}) {
    if (!j.contains(req)) return Status::InvalidFormat(std::string("zarr.json lacks \"") + req + "\"");
  }

  ArrayMetadata m;
  LSIO_ASSIGN_OR_RETURN(m.shape, ParseShape(j["shape"], "shape", true));
  if (j["data_type"].is_object() && j["data_type"].value("name", nlohmann::json()) == "lsio.v2.structured") {
    // lsio's own name for a .zarray's record descr (metadata_v2.cc), never a zarr.json's
    return Status::Unimplemented("data type 'lsio.v2.structured' is not a Zarr v3 data type");
  }
  LSIO_ASSIGN_OR_RETURN(m.dtype, ParseDataType(j["data_type"]));
  LSIO_RETURN_IF_ERROR(CheckSize(m.shape, m.dtype.itemsize, "the array"));
  const size_t rank = m.shape.size();

  // chunk_grid
  {
    std::string name;
    nlohmann::json config;
    Status st = CodecNameAndConfig(j["chunk_grid"], &name, &config);
    if (!st.ok()) return Status::InvalidFormat("chunk_grid: " + st.message());
    if (name != "regular") return Status::Unimplemented("chunk grid '" + name + "' is not supported (only 'regular')");
    auto cs = config.find("chunk_shape");
    if (cs == config.end()) return Status::InvalidFormat("chunk_grid lacks chunk_shape");
    LSIO_ASSIGN_OR_RETURN(m.chunk_shape, ParseShape(*cs, "chunk_grid.chunk_shape", false));
    if (m.chunk_shape.size() != rank) {
      return Status::InvalidFormat("chunk_shape has rank " + std::to_string(m.chunk_shape.size()) +
                                   ", shape has rank " + std::to_string(rank));
    }
    LSIO_RETURN_IF_ERROR(CheckSize(m.chunk_shape, m.dtype.itemsize, "a chunk"));
  }

  LSIO_ASSIGN_OR_RETURN(m.key_encoding, ParseChunkKeyEncoding(j["chunk_key_encoding"]));
  nlohmann::json fill = j["fill_value"];
  auto unmark = [](nlohmann::json& v) {
    if (v.is_string() && v.get<std::string>().rfind(kBareMarker, 0) == 0) {
      v = v.get<std::string>().substr(kBareMarker.size());  // bare NaN -> "NaN"
    }
  };
  unmark(fill);
  if (fill.is_array()) for (auto& part : fill) unmark(part);
  LSIO_ASSIGN_OR_RETURN(m.fill_value, ParseFillValue(fill, m.dtype));

  if (auto st = j.find("storage_transformers"); st != j.end() && !st->is_null()) {
    if (!st->is_array()) return Status::InvalidFormat("storage_transformers must be a list");
    if (!st->empty()) return Status::Unimplemented("storage transformers are not supported");
  }
  if (auto at = j.find("attributes"); at != j.end() && !at->is_null()) {
    if (!at->is_object()) return Status::InvalidFormat("attributes must be an object");
    m.attributes = *at;
  }
  m.attributes_json = RestoreBareNonFinite(m.attributes.dump());
  if (auto dn = j.find("dimension_names"); dn != j.end() && !dn->is_null()) {
    if (!dn->is_array() || dn->size() != rank) {
      return Status::InvalidFormat("dimension_names must be a list with one entry per dimension");
    }
    std::vector<std::optional<std::string>> names;
    for (const auto& v : *dn) {
      if (v.is_null()) names.emplace_back(std::nullopt);
      else if (v.is_string()) names.emplace_back(v.get<std::string>());
      else return Status::InvalidFormat("dimension_names entries must be strings or null");
    }
    m.dimension_names = std::move(names);
  }

  // codecs: either a plain chain, or [sharding_indexed] with the chain inside.
  const nlohmann::json& codecs = j["codecs"];
  if (!codecs.is_array()) return Status::InvalidFormat("\"codecs\" must be a list");
  if (codecs.empty()) return Status::InvalidFormat("\"codecs\" must not be empty");
  int shard_pos = -1;
  for (size_t i = 0; i < codecs.size(); ++i) {
    std::string name;
    nlohmann::json config;
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[i], &name, &config));
    if (name == "sharding_indexed") {
      shard_pos = static_cast<int>(i);
      break;
    }
  }
  ChunkSpec spec;
  spec.itemsize = m.dtype.itemsize;
  spec.swap_unit = m.dtype.swap_unit;
  if (shard_pos < 0) {
    m.read_chunk_shape = m.chunk_shape;
    spec.shape = m.read_chunk_shape;
    LSIO_ASSIGN_OR_RETURN(m.chain, ParseCodecChain(codecs, spec));
    m.codecs_description = m.chain->description();
    return m;
  }
  // transpose codecs before sharding_indexed: the shard is transposed whole, then sharded.
  // Its inner chunks are then blocks of the untransposed shard too, each stored transposed,
  // and the shard index lists them in C order of the transposed grid: the same sharded
  // array with a transpose first in each inner chunk's codecs and the index in that order.
  std::vector<int> order;
  for (int i = 0; i < shard_pos; ++i) {
    std::string name;
    nlohmann::json config;
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[static_cast<size_t>(i)], &name, &config));
    if (name != "transpose") {
      return Status::Unimplemented("array -> array codec '" + name +
                                   "' before sharding_indexed is not supported by lsio yet (transpose is)");
    }
    LSIO_ASSIGN_OR_RETURN(std::vector<int> next, TransposeOrder(config, m.shape.size()));
    if (order.empty()) {
      order = std::move(next);
    } else {  // encoding applies `order`, then `next`: together order[next[i]]
      std::vector<int> both(next.size());
      for (size_t k = 0; k < next.size(); ++k) both[k] = order[static_cast<size_t>(next[k])];
      order = std::move(both);
    }
  }
  // bytes -> bytes codecs after sharding_indexed compress each shard whole.
  std::string whole;
  for (size_t i = static_cast<size_t>(shard_pos) + 1; i < codecs.size(); ++i) {
    LSIO_ASSIGN_OR_RETURN(std::unique_ptr<Codec> c, ParseCodec(codecs[i]));
    if (c->kind() != CodecKind::kBytesToBytes) {
      return Status::InvalidFormat("codec '" + c->name() + "' after sharding_indexed: only bytes -> bytes codecs "
                                   "may follow it");
    }
    whole += ", " + c->name();
    m.shard_codecs.push_back(std::move(c));
  }
  std::string name;
  nlohmann::json config;
  LSIO_RETURN_IF_ERROR(CodecNameAndConfig(codecs[static_cast<size_t>(shard_pos)], &name, &config));
  const size_t nd = m.chunk_shape.size();
  std::vector<int64_t> stored_shape = m.chunk_shape;  // the shard as sharding_indexed sees it
  for (size_t k = 0; k < order.size(); ++k) stored_shape[k] = m.chunk_shape[static_cast<size_t>(order[k])];
  LSIO_ASSIGN_OR_RETURN(ShardLayout layout, ParseShardLayout(config, stored_shape));
  if (!order.empty()) {
    std::vector<int64_t> inner(nd), per(nd);
    for (size_t k = 0; k < nd; ++k) {
      inner[static_cast<size_t>(order[k])] = layout.inner_shape[k];
      per[static_cast<size_t>(order[k])] = layout.chunks_per_shard[k];
    }
    layout.inner_shape = std::move(inner);
    layout.chunks_per_shard = std::move(per);
    layout.index_order = order;
  }
  auto inner = config.find("codecs");
  if (inner == config.end() || !inner->is_array()) {
    return Status::InvalidFormat("sharding_indexed: missing inner \"codecs\" list");
  }
  // Nested sharding: the inner chunks are shards themselves ([sharding_indexed] as the inner
  // codecs). The array is then read as sharded by those inner shards (their layout in
  // m.sharding, their keys as if they were the array's shards), which
  // source/resident_store.h's NestedShardStore cuts out of the outer shards by the outer
  // index (m.outer_sharding).
  const nlohmann::json* inner_list = &*inner;
  nlohmann::json nested_codecs;  // the inner shards' inner codecs (outlives the loop below)
  std::string nested_open, nested_close;
  for (size_t i = 0; i < inner->size(); ++i) {
    std::string n;
    nlohmann::json cfg;
    LSIO_RETURN_IF_ERROR(CodecNameAndConfig((*inner)[i], &n, &cfg));
    if (n != "sharding_indexed") continue;
    if (i != 0 || inner->size() != 1) {
      return Status::Unimplemented("nested sharding with other codecs beside the inner sharding_indexed is not "
                                   "supported by lsio yet");
    }
    if (!order.empty()) {
      return Status::Unimplemented("nested sharding of transposed shards is not supported by lsio yet");
    }
    LSIO_ASSIGN_OR_RETURN(ShardLayout second, ParseShardLayout(cfg, layout.inner_shape));
    auto deeper = cfg.find("codecs");
    if (deeper == cfg.end() || !deeper->is_array()) {
      return Status::InvalidFormat("sharding_indexed: missing inner \"codecs\" list");
    }
    for (const auto& c : *deeper) {
      std::string n2;
      nlohmann::json cfg2;
      LSIO_RETURN_IF_ERROR(CodecNameAndConfig(c, &n2, &cfg2));
      if (n2 == "sharding_indexed") {
        return Status::Unimplemented("sharding nested more than two levels deep is not supported by lsio yet");
      }
    }
    m.outer_sharding = std::move(layout);
    layout = std::move(second);
    nested_codecs = *deeper;
    inner_list = &nested_codecs;
    nested_open = "sharding_indexed[";
    nested_close = "]";
  }
  m.read_chunk_shape = layout.inner_shape;
  spec.shape = m.read_chunk_shape;
  nlohmann::json inner_codecs = *inner_list;
  if (!order.empty()) {  // each inner chunk is a block of the transposed shard
    nlohmann::json transpose = nlohmann::json::object();
    transpose["name"] = "transpose";
    transpose["configuration"]["order"] = order;
    inner_codecs.insert(inner_codecs.begin(), std::move(transpose));
  }
  LSIO_ASSIGN_OR_RETURN(m.chain, ParseCodecChain(inner_codecs, spec));
  m.codecs_description = "sharding_indexed[" + nested_open + m.chain->description() + nested_close + "]" + whole;
  m.sharding = std::move(layout);
  return m;
}

// Shared with the v2 parser (metadata_v2.cc).
Result<std::vector<int64_t>> ParseArrayShape(const nlohmann::json& j, const char* what, bool allow_zero) {
  return ParseShape(j, what, allow_zero);
}
Status CheckArraySize(const std::vector<int64_t>& shape, size_t itemsize, const char* what) {
  return CheckSize(shape, itemsize, what);
}
std::string RestoreNonFinite(std::string dumped) { return RestoreBareNonFinite(std::move(dumped)); }
std::string_view BareNonFiniteMarker() { return kBareMarker; }

}  // namespace lsio
