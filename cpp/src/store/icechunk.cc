// Icechunk metadata files read through flatc's generated code (see store/icechunk.h).
#include "store/icechunk.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "flatbuffers/flexbuffers.h"
#include "icechunk_generated.h"

namespace lsio {
namespace {

namespace fb = icechunk_fb;

constexpr char kMagic[] = "ICE\xF0\x9F\xA7\x8A" "CHUNK";  // "ICE🧊CHUNK", 12 bytes
constexpr size_t kMagicSize = 12;
constexpr size_t kHeaderSize = kMagicSize + 24 + 3;

const char* TypeName(IcechunkFileType t) {
  switch (t) {
    case IcechunkFileType::kSnapshot: return "snapshot";
    case IcechunkFileType::kManifest: return "manifest";
    case IcechunkFileType::kTransactionLog: return "transaction log";
    case IcechunkFileType::kRepoInfo: return "repo info";
  }
  return "unknown";
}

// Verifies `payload` as a buffer whose root is T. Manifests hold one table per chunk: the
// table budget grows with the buffer (a table takes at least 4 bytes).
template <typename T>
const T* Verified(const std::string& payload) {
  const auto* data = reinterpret_cast<const uint8_t*>(payload.data());
  flatbuffers::Verifier::Options o;
  o.max_depth = 64;
  o.max_tables = static_cast<flatbuffers::uoffset_t>(std::max<size_t>(1000000, payload.size() / 4 + 16));
  flatbuffers::Verifier v(data, payload.size(), o);
  if (!v.VerifyBuffer<T>(nullptr)) return nullptr;
  return flatbuffers::GetRoot<T>(data);
}

Status Malformed(const std::string& what) { return Status::InvalidFormat("malformed Icechunk " + what); }

std::string Id12(const fb::ObjectId12* id) {
  return id == nullptr ? std::string() : CrockfordBase32(id->bytes()->data(), 12);
}

std::string Bytes(const flatbuffers::Vector<uint8_t>* v) {
  return v == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(v->data()), v->size());
}

// A FlexBuffer value as JSON (the repository configuration); blobs become arrays of bytes.
// `budget`: values left to convert. The verifier lets a vector be referenced from many places,
// so a small buffer could expand without bound; a configuration is a few hundred values.
Result<nlohmann::json> FlexToJson(const flexbuffers::Reference& r, int depth, int64_t* budget) {
  if (depth > 64) return Malformed("repository configuration: nested too deeply");
  if (--*budget < 0) return Malformed("repository configuration: more values than its size allows");
  if (r.IsNull()) return nlohmann::json(nullptr);
  if (r.IsBool()) return nlohmann::json(r.AsBool());
  if (r.IsInt()) return nlohmann::json(r.AsInt64());
  if (r.IsUInt()) return nlohmann::json(r.AsUInt64());
  if (r.IsFloat()) return nlohmann::json(r.AsDouble());
  if (r.IsString()) return nlohmann::json(r.AsString().str());
  if (r.IsKey()) return nlohmann::json(std::string(r.AsKey()));
  if (r.IsMap()) {
    nlohmann::json out = nlohmann::json::object();
    const flexbuffers::Map m = r.AsMap();
    const flexbuffers::TypedVector keys = m.Keys();
    const flexbuffers::Vector vals = m.Values();
    for (size_t i = 0; i < keys.size(); ++i) {
      LSIO_ASSIGN_OR_RETURN(nlohmann::json v, FlexToJson(vals[i], depth + 1, budget));
      out[keys[i].AsKey()] = std::move(v);
    }
    return out;
  }
  if (r.IsBlob()) {
    const flexbuffers::Blob b = r.AsBlob();
    nlohmann::json out = nlohmann::json::array();
    *budget -= static_cast<int64_t>(b.size());
    if (*budget < 0) return Malformed("repository configuration: more values than its size allows");
    for (size_t i = 0; i < b.size(); ++i) out.push_back(b.data()[i]);
    return out;
  }
  if (r.IsAnyVector()) {
    nlohmann::json out = nlohmann::json::array();
    const flexbuffers::Vector v = r.AsVector();
    for (size_t i = 0; i < v.size(); ++i) {
      LSIO_ASSIGN_OR_RETURN(nlohmann::json x, FlexToJson(v[i], depth + 1, budget));
      out.push_back(std::move(x));
    }
    return out;
  }
  return Malformed("repository configuration: a value of FlexBuffer type " + std::to_string(r.GetType()));
}

// Names, paths and messages reach Python as str: they must be UTF-8 (the spec says they are).
bool Utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range (no overlong forms,
    if (c < 0x80) {                      // surrogates or code points past U+10FFFF)
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;
    }
    if (n > s.size() - i - 1) return false;
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) return false;
    for (size_t k = 2; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n + 1;
  }
  return true;
}

Result<std::string> Text(const flatbuffers::String* s, const char* what) {
  if (s == nullptr) return std::string();
  std::string out = s->str();
  if (!Utf8(out)) return Malformed(std::string(what) + " (not UTF-8)");
  return out;
}

void AppendUint(std::string* s, uint32_t v) {
  char buf[16];
  const int n = std::snprintf(buf, sizeof(buf), "%u", v);
  s->append(buf, static_cast<size_t>(n));
}

struct DDictFree {
  void operator()(ZSTD_DDict* d) const { ZSTD_freeDDict(d); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

}  // namespace

std::string CrockfordBase32(const uint8_t* bytes, size_t n) {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  std::string out;
  out.reserve((n * 8 + 4) / 5);
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; ++i) {
    acc = (acc << 8) | bytes[i];
    bits += 8;
    while (bits >= 5) {
      out.push_back(kAlphabet[(acc >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (5 - bits)) & 31]);  // zero bits on the right
  return out;
}

Result<std::string> IcechunkPayload(std::string_view file, IcechunkFileType want, int* spec_version) {
  if (file.size() < kHeaderSize || std::memcmp(file.data(), kMagic, kMagicSize) != 0) {
    return Status::InvalidFormat(std::string("not an Icechunk ") + TypeName(want) + " file (no Icechunk header)");
  }
  const auto version = static_cast<uint8_t>(file[kMagicSize + 24]);
  const auto type = static_cast<uint8_t>(file[kMagicSize + 25]);
  const auto compression = static_cast<uint8_t>(file[kMagicSize + 26]);
  if (version != 1 && version != 2) {
    return Status::Unimplemented("Icechunk spec version " + std::to_string(version) +
                                 " (lsio reads versions 1 and 2)");
  }
  if (type != static_cast<uint8_t>(want)) {
    return Status::InvalidFormat(std::string("expected an Icechunk ") + TypeName(want) + " file, found file type " +
                                 std::to_string(type));
  }
  if (spec_version != nullptr) *spec_version = version;
  const std::string_view body = file.substr(kHeaderSize);
  if (compression == 0) return std::string(body);
  if (compression != 1) {
    return Status::InvalidFormat("Icechunk file compressed with unknown algorithm " + std::to_string(compression));
  }
  // Frames may not declare their size: decompress as a stream, bounded.
  std::unique_ptr<ZSTD_DCtx, DCtxFree> d(ZSTD_createDCtx());
  if (!d) return Status::ResourceExhausted("cannot create a zstd context");
  std::string out;
  const unsigned long long declared = ZSTD_getFrameContentSize(body.data(), body.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR) {
    if (declared > kIcechunkMaxPayload) {
      return Status::InvalidFormat("Icechunk file decompresses to " + std::to_string(declared) +
                                   " bytes, more than lsio reads");
    }
    out.reserve(static_cast<size_t>(declared));
  }
  ZSTD_inBuffer in{body.data(), body.size(), 0};
  std::string chunk(1 << 16, '\0');
  size_t ret = 1;
  while (in.pos < in.size || ret != 0) {
    ZSTD_outBuffer o{chunk.data(), chunk.size(), 0};
    ret = ZSTD_decompressStream(d.get(), &o, &in);
    if (ZSTD_isError(ret)) {
      return Status::InvalidFormat(std::string("Icechunk file: zstd: ") + ZSTD_getErrorName(ret));
    }
    out.append(chunk.data(), o.pos);
    if (out.size() > kIcechunkMaxPayload) {
      return Status::InvalidFormat("Icechunk file decompresses to more than " + std::to_string(kIcechunkMaxPayload) +
                                   " bytes");
    }
    if (in.pos == in.size && o.pos == 0 && ret != 0) {
      return Status::InvalidFormat("Icechunk file: truncated zstd frame");
    }
  }
  return out;
}

Result<IcechunkRepoInfo> ParseIcechunkRepo(std::string_view file) {
  IcechunkRepoInfo info;
  LSIO_ASSIGN_OR_RETURN(std::string payload, IcechunkPayload(file, IcechunkFileType::kRepoInfo, &info.spec_version));
  const fb::Repo* repo = Verified<fb::Repo>(payload);
  if (repo == nullptr) return Malformed("repo info file (FlatBuffers verification failed)");
  const auto* snaps = repo->snapshots();
  if (snaps == nullptr || repo->branches() == nullptr) return Malformed("repo info file (no snapshots or branches)");
  auto refs = [&](const flatbuffers::Vector<flatbuffers::Offset<fb::Ref>>* v,
                  std::vector<std::pair<std::string, std::string>>* out) -> Status {
    if (v == nullptr) return Status::Ok();
    for (const fb::Ref* r : *v) {
      if (r->name() == nullptr || r->snapshot_index() >= snaps->size() || snaps->Get(r->snapshot_index())->id() == nullptr) {
        return Malformed("repo info file (a branch or tag names no snapshot)");
      }
      LSIO_ASSIGN_OR_RETURN(std::string name, Text(r->name(), "repo info file (a branch or tag name)"));
      out->emplace_back(std::move(name), Id12(snaps->Get(r->snapshot_index())->id()));
    }
    return Status::Ok();
  };
  for (const fb::SnapshotInfo* si : *snaps) {
    if (si->id() == nullptr) return Malformed("repo info file (a snapshot without id)");
    info.snapshots.push_back(Id12(si->id()));
  }
  LSIO_RETURN_IF_ERROR(refs(repo->branches(), &info.branches));
  LSIO_RETURN_IF_ERROR(refs(repo->tags(), &info.tags));
  if (repo->deleted_tags() != nullptr) {
    for (const flatbuffers::String* s : *repo->deleted_tags()) {
      LSIO_ASSIGN_OR_RETURN(std::string name, Text(s, "repo info file (a deleted tag's name)"));
      info.deleted_tags.push_back(std::move(name));
    }
  }
  if (const auto* c = repo->config(); c != nullptr && c->size() > 0) {
    std::vector<uint8_t> reuse;
    if (!flexbuffers::VerifyBuffer(c->data(), c->size(), &reuse)) {
      return Malformed("repo info file (its configuration is not a valid FlexBuffer)");
    }
    int64_t budget = 4 * static_cast<int64_t>(c->size()) + 1024;
    LSIO_ASSIGN_OR_RETURN(nlohmann::json j, FlexToJson(flexbuffers::GetRoot(c->data(), c->size()), 0, &budget));
    // FlexBuffer strings need not be UTF-8: such bytes become U+FFFD, as a JSON text must.
    info.config_json = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return info;
}

Result<IcechunkSnapshot> ParseIcechunkSnapshot(std::string_view file) {
  IcechunkSnapshot snap;
  LSIO_ASSIGN_OR_RETURN(std::string payload, IcechunkPayload(file, IcechunkFileType::kSnapshot, &snap.spec_version));
  const fb::Snapshot* s = Verified<fb::Snapshot>(payload);
  if (s == nullptr) return Malformed("snapshot file (FlatBuffers verification failed)");
  if (s->id() == nullptr || s->nodes() == nullptr) return Malformed("snapshot file (no id or nodes)");
  snap.id = Id12(s->id());
  snap.parent_id = Id12(s->parent_id());
  snap.flushed_at_us = s->flushed_at();
  LSIO_ASSIGN_OR_RETURN(snap.message, Text(s->message(), "snapshot file (its message)"));
  snap.nodes.reserve(s->nodes()->size());
  for (const fb::NodeSnapshot* n : *s->nodes()) {
    if (n->id() == nullptr || n->path() == nullptr || n->user_data() == nullptr) {
      return Malformed("snapshot file (a node without id, path or metadata)");
    }
    IcechunkNode node;
    LSIO_ASSIGN_OR_RETURN(node.path, Text(n->path(), "snapshot file (a node path)"));
    if (node.path.empty() || node.path.front() != '/') {
      return Malformed("snapshot file (node path \"" + node.path + "\" is not absolute)");
    }
    node.node_id.assign(reinterpret_cast<const char*>(n->id()->bytes()->data()), 8);
    node.user_data = Bytes(n->user_data());
    if (n->node_data_type() == fb::NodeData_Array) {
      const fb::ArrayNodeData* a = n->node_data_as_Array();
      if (a == nullptr) return Malformed("snapshot file (array node \"" + node.path + "\" without data)");
      node.is_array = true;
      if (a->manifests() != nullptr) {
        for (const fb::ManifestRef* m : *a->manifests()) {
          if (m->object_id() == nullptr || m->extents() == nullptr) {
            return Malformed("snapshot file (a manifest reference of \"" + node.path + "\" without id or extents)");
          }
          IcechunkManifestRef ref;
          ref.id = Id12(m->object_id());
          for (const fb::ChunkIndexRange* e : *m->extents()) ref.extents.emplace_back(e->from(), e->to());
          node.manifests.push_back(std::move(ref));
        }
      }
    } else if (n->node_data_type() != fb::NodeData_Group) {
      return Malformed("snapshot file (node \"" + node.path + "\" is neither an array nor a group)");
    }
    snap.nodes.push_back(std::move(node));
  }
  return snap;
}

Status AddIcechunkManifest(std::string_view file, const IcechunkArrayKeys& keys,
                           const std::vector<std::pair<uint32_t, uint32_t>>& extents, Manifest::Builder* b,
                           std::vector<IcechunkCheck>* checks) {
  LSIO_ASSIGN_OR_RETURN(std::string payload, IcechunkPayload(file, IcechunkFileType::kManifest));
  const fb::Manifest* m = Verified<fb::Manifest>(payload);
  if (m == nullptr) return Malformed("manifest file (FlatBuffers verification failed)");
  if (m->arrays() == nullptr) return Malformed("manifest file (no arrays)");
  if (extents.size() != keys.ndim) {
    return Malformed("snapshot (a manifest reference with " + std::to_string(extents.size()) +
                     " extents for an array of " + std::to_string(keys.ndim) + " dimensions)");
  }
  const fb::ArrayManifest* am = nullptr;
  for (const fb::ArrayManifest* a : *m->arrays()) {  // sorted by node id, but few per file
    if (a->node_id() != nullptr && std::memcmp(a->node_id()->bytes()->data(), keys.node_id.data(), 8) == 0) {
      am = a;
      break;
    }
  }
  if (am == nullptr || am->refs() == nullptr) return Status::Ok();  // no references: fill value

  std::unique_ptr<ZSTD_DDict, DDictFree> dict;
  std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx;
  std::string location(4096, '\0');
  const std::string prefix = keys.root.empty() ? std::string() : keys.root + "/";
  std::string key;
  for (const fb::ChunkRef* r : *am->refs()) {
    const auto* index = r->index();
    if (index == nullptr || index->size() != keys.ndim) {
      return Malformed("manifest file (a chunk reference with " + std::to_string(index == nullptr ? 0 : index->size()) +
                       " coordinates for an array of " + std::to_string(keys.ndim) + " dimensions)");
    }
    bool inside = true;
    for (size_t d = 0; d < keys.ndim && inside; ++d) {
      inside = index->Get(d) >= extents[d].first && index->Get(d) < extents[d].second;
    }
    if (!inside) continue;  // outside what the snapshot takes from this manifest
    key = prefix;
    if (keys.v2_keys) {
      if (keys.ndim == 0) key += '0';
      for (size_t d = 0; d < keys.ndim; ++d) {
        if (d > 0) key += keys.separator;
        AppendUint(&key, index->Get(d));
      }
    } else {
      key += 'c';
      for (size_t d = 0; d < keys.ndim; ++d) {
        key += keys.separator;
        AppendUint(&key, index->Get(d));
      }
    }
    if (r->inline_bytes() != nullptr) {
      b->AddInline(key, Bytes(r->inline_bytes()));
      continue;
    }
    // A length of 2^64 - 1 is the Manifest's mark for a whole object: never a chunk's.
    if (r->length() == UINT64_MAX || r->offset() > UINT64_MAX - r->length()) {
      return Malformed("manifest file (chunk reference \"" + key + "\" has the byte range offset " +
                       std::to_string(r->offset()) + " length " + std::to_string(r->length()) + ")");
    }
    if (r->chunk_id() != nullptr) {
      b->AddRange(key, b->Url("chunks/" + Id12(r->chunk_id())), r->offset(), r->length());
      continue;
    }
    std::string url;
    if (r->location() != nullptr) {
      url = r->location()->str();
    } else if (r->compressed_location() != nullptr) {
      if (m->compression_algorithm() != 1 || m->location_dictionary() == nullptr) {
        return Malformed("manifest file (a compressed location without a zstd dictionary)");
      }
      if (!dict) {
        dict.reset(ZSTD_createDDict(m->location_dictionary()->data(), m->location_dictionary()->size()));
        dctx.reset(ZSTD_createDCtx());
        if (!dict || !dctx) return Malformed("manifest file (its location dictionary is not a zstd dictionary)");
      }
      const auto* c = r->compressed_location();
      const size_t n = ZSTD_decompress_usingDDict(dctx.get(), location.data(), location.size(), c->data(), c->size(),
                                                  dict.get());
      if (ZSTD_isError(n)) {
        return Malformed(std::string("manifest file (a compressed location: zstd: ") + ZSTD_getErrorName(n) + ")");
      }
      url.assign(location.data(), n);
    } else {
      return Malformed("manifest file (chunk reference \"" + key + "\" is neither inline, native nor virtual)");
    }
    if (url.empty() || !Utf8(url)) {
      return Malformed("manifest file (chunk reference \"" + key + "\" has an empty or non-UTF-8 location)");
    }
    const uint32_t u = b->Url(url);
    b->AddRange(key, u, r->offset(), r->length());
    IcechunkCheck check;
    LSIO_ASSIGN_OR_RETURN(check.etag, Text(r->checksum_etag(), "manifest file (an ETag checksum)"));
    check.last_modified = r->checksum_last_modified();
    if (checks->size() <= u) checks->resize(u + 1);
    IcechunkCheck& have = (*checks)[u];
    if (have.etag.empty()) have.etag = check.etag;
    // Several last-modified times for one object: the earliest holds for all of them.
    if (check.last_modified != 0 && (have.last_modified == 0 || check.last_modified < have.last_modified)) {
      have.last_modified = check.last_modified;
    }
    if (!check.etag.empty() && check.etag != have.etag) {
      // Two versions of one object: the chunks of one of them would fail their check anyway.
      return Malformed("manifest file (virtual references to " + url + " were written against two versions of it, "
                       "ETags " + have.etag + " and " + check.etag + ")");
    }
  }
  return Status::Ok();
}

}  // namespace lsio
