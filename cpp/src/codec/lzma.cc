// numcodecs' `lzma` compressor (bytes -> bytes; Zarr v2 id "lzma", v3 "numcodecs.lzma"),
// decoded with liblzma. Formats 0 (auto), 1 (.xz, the default) and 2 (legacy .lzma) describe
// themselves and are read by lzma's auto decoder, concatenated streams included. Format 3
// (raw) has no header: its filter chain (LZMA1/LZMA2, delta, the BCJ filters) comes from the
// configuration's `filters`, spelled as Python's lzma module takes them.
#include <lzma.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "codec/registry.h"

namespace lsio {
namespace {

// One raw filter chain as liblzma takes it: lzma_filter entries pointing into `options`.
struct RawChain {
  RawChain() = default;
  RawChain(RawChain&&) = default;  // the vectors' storage, and so the pointers, move along
  RawChain& operator=(RawChain&&) = default;
  RawChain(const RawChain&) = delete;

  std::vector<lzma_filter> filters;  // ends with LZMA_VLI_UNKNOWN
  std::vector<lzma_options_lzma> lzma;
  std::vector<lzma_options_delta> delta;
  std::vector<lzma_options_bcj> bcj;

  // Pointers into the option vectors are taken only here, once they no longer grow.
  void Link(const std::vector<std::pair<lzma_vli, char>>& kinds) {
    filters.clear();
    size_t l = 0, d = 0, b = 0;
    for (const auto& [id, kind] : kinds) {
      void* opt = kind == 'l' ? static_cast<void*>(&lzma[l++]) : kind == 'd' ? static_cast<void*>(&delta[d++])
                                                                             : static_cast<void*>(&bcj[b++]);
      filters.push_back({id, opt});
    }
    filters.push_back({LZMA_VLI_UNKNOWN, nullptr});
  }
};

// Decodes all of `in` into [dst, dst + cap); *produced > cap when the data is larger. With
// `raw`, each stream is a raw one of that chain; as Python's lzma.decompress, streams follow
// one another, and bytes after the first stream that are not a stream (corrupt from their
// start, not cut short) are ignored.
Status Unxz(std::span<const uint8_t> in, uint8_t* dst, size_t cap, size_t* produced, const RawChain* raw) {
  size_t in_pos = 0, out_pos = 0;
  uint8_t probe;
  for (int stream = 0; stream == 0 || (raw != nullptr && in_pos < in.size()); ++stream) {
    lzma_stream s = LZMA_STREAM_INIT;
    const lzma_ret init = raw != nullptr ? lzma_raw_decoder(&s, raw->filters.data())
                                         : lzma_auto_decoder(&s, UINT64_MAX, LZMA_CONCATENATED);
    if (init == LZMA_MEM_ERROR) return Status::ResourceExhausted("lzma: cannot start a decoder");
    if (init != LZMA_OK) {
      return Status::InvalidFormat("lzma: liblzma refuses the filter chain (error " +
                                   std::to_string(static_cast<int>(init)) + ")");
    }
    s.next_in = in.data() + in_pos;
    s.avail_in = in.size() - in_pos;
    const size_t stream_start = out_pos;
    lzma_action action = LZMA_RUN;
    Status st;
    bool ended = false, over = false, truncated = false;
    for (;;) {
      const bool full = out_pos >= cap;
      s.next_out = full ? &probe : dst + out_pos;
      s.avail_out = full ? 1 : cap - out_pos;
      const size_t out_before = s.avail_out;
      if (s.avail_in == 0) action = LZMA_FINISH;  // tells the decoder the input ended
      const lzma_ret r = lzma_code(&s, action);
      out_pos += out_before - s.avail_out;
      if (full && s.avail_out == 0) {
        over = true;
        break;
      }
      if (r == LZMA_STREAM_END) {
        ended = true;
        break;
      }
      if (r == LZMA_BUF_ERROR) {
        st = Status::DataLoss("lzma: truncated stream");
        truncated = true;
        break;
      }
      if (r != LZMA_OK) {
        st = Status::DataLoss("lzma: corrupt data (liblzma error " + std::to_string(static_cast<int>(r)) + ")");
        break;
      }
    }
    in_pos = in.size() - s.avail_in;
    lzma_end(&s);
    if (over) {
      *produced = cap + 1;
      return Status::Ok();
    }
    if (!st.ok()) {
      // Trailing bytes that are not a stream are dropped, as Python does; a stream that
      // starts well and is cut short is an error there too.
      if (stream == 0 || truncated) return st;
      out_pos = stream_start;
      break;
    }
    if (!ended) break;
  }
  *produced = out_pos;
  return Status::Ok();
}

class LzmaCodec final : public BytesToBytesCodec {
 public:
  explicit LzmaCodec(std::optional<RawChain> raw) : raw_(std::move(raw)) {}
  std::string name() const override { return "lzma"; }
  uint64_t MaxEncodedSize(uint64_t decoded) const override {
    return lzma_stream_buffer_bound(static_cast<size_t>(decoded)) + 4096;
  }

  Status DecodeBytes(std::span<const uint8_t> in, BytesOut& out, DecodeScratch& scratch) const override {
    if (in.empty()) return Status::DataLoss("lzma: empty chunk");
    return DecodeUnknownSize(out, in.size() * 4 + 4096, "lzma", [&](uint8_t* dst, size_t cap, size_t* produced) {
      return Unxz(in, dst, cap, produced, raw_ ? &*raw_ : nullptr);
    });
  }

 private:
  std::optional<RawChain> raw_;  // format 3: the chain from the configuration
};

// Largest memory a raw chain's decoder may take: liblzma allocates the dictionary the
// configuration names whatever the chunk's size, so forged metadata must not make every
// decode thread allocate 1.5 GiB.
constexpr uint64_t kRawDecoderMemoryLimit = uint64_t{1} << 30;

Result<int64_t> FilterInt(const nlohmann::json& spec, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return Status::InvalidFormat(std::string("lzma codec: filter \"") + key + "\" must be an integer in " +
                                 std::to_string(lo) + ".." + std::to_string(hi));
  }
  return it->get<int64_t>();
}

// `filters` of a raw lzma configuration, checked as Python's lzma module checks them.
Result<RawChain> ParseRawChain(const nlohmann::json& config) {
  auto it = config.find("filters");
  if (it == config.end() || !it->is_array() || it->empty()) {
    return Status::InvalidFormat("lzma codec: raw streams (format 3) need a non-empty \"filters\" list");
  }
  if (it->size() > LZMA_FILTERS_MAX) {
    return Status::InvalidFormat("lzma codec: at most " + std::to_string(LZMA_FILTERS_MAX) + " filters");
  }
  RawChain chain;
  std::vector<std::pair<lzma_vli, char>> kinds;
  for (const auto& spec : *it) {
    auto id_it = spec.is_object() ? spec.find("id") : spec.end();
    if (id_it == spec.end() || !id_it->is_number_unsigned()) {
      return Status::InvalidFormat("lzma codec: each filter must be an object with an integer \"id\"");
    }
    const lzma_vli id = id_it->get<uint64_t>();
    auto only = [&](std::initializer_list<const char*> keys) -> Status {
      for (const auto& [k, v] : spec.items()) {
        if (std::none_of(keys.begin(), keys.end(), [&](const char* a) { return k == a; })) {
          return Status::InvalidFormat("lzma codec: filter " + std::to_string(id) + " does not take \"" + k + "\"");
        }
      }
      return Status::Ok();
    };
    if (id == LZMA_FILTER_LZMA1 || id == LZMA_FILTER_LZMA2) {
      LSIO_RETURN_IF_ERROR(only({"id", "preset", "dict_size", "lc", "lp", "pb", "mode", "nice_len", "mf", "depth"}));
      LSIO_ASSIGN_OR_RETURN(int64_t preset, FilterInt(spec, "preset", LZMA_PRESET_DEFAULT, 0, UINT32_MAX));
      lzma_options_lzma opt{};
      if (lzma_lzma_preset(&opt, static_cast<uint32_t>(preset))) {
        return Status::InvalidFormat("lzma codec: invalid compression preset " + std::to_string(preset));
      }
      LSIO_ASSIGN_OR_RETURN(int64_t dict, FilterInt(spec, "dict_size", opt.dict_size, LZMA_DICT_SIZE_MIN, UINT32_MAX));
      LSIO_ASSIGN_OR_RETURN(int64_t lc, FilterInt(spec, "lc", opt.lc, LZMA_LCLP_MIN, LZMA_LCLP_MAX));
      LSIO_ASSIGN_OR_RETURN(int64_t lp, FilterInt(spec, "lp", opt.lp, LZMA_LCLP_MIN, LZMA_LCLP_MAX));
      LSIO_ASSIGN_OR_RETURN(int64_t pb, FilterInt(spec, "pb", opt.pb, LZMA_PB_MIN, LZMA_PB_MAX));
      // mode, nice_len, mf and depth steer only the encoder.
      opt.dict_size = static_cast<uint32_t>(dict);
      opt.lc = static_cast<uint32_t>(lc);
      opt.lp = static_cast<uint32_t>(lp);
      opt.pb = static_cast<uint32_t>(pb);
      chain.lzma.push_back(opt);
      kinds.push_back({id, 'l'});
    } else if (id == LZMA_FILTER_DELTA) {
      LSIO_RETURN_IF_ERROR(only({"id", "dist"}));
      LSIO_ASSIGN_OR_RETURN(int64_t dist, FilterInt(spec, "dist", 1, LZMA_DELTA_DIST_MIN, LZMA_DELTA_DIST_MAX));
      lzma_options_delta opt{};
      opt.type = LZMA_DELTA_TYPE_BYTE;
      opt.dist = static_cast<uint32_t>(dist);
      chain.delta.push_back(opt);
      kinds.push_back({id, 'd'});
    } else if (id == LZMA_FILTER_X86 || id == LZMA_FILTER_POWERPC || id == LZMA_FILTER_IA64 ||
               id == LZMA_FILTER_ARM || id == LZMA_FILTER_ARMTHUMB || id == LZMA_FILTER_SPARC) {
      LSIO_RETURN_IF_ERROR(only({"id", "start_offset"}));
      LSIO_ASSIGN_OR_RETURN(int64_t start, FilterInt(spec, "start_offset", 0, 0, UINT32_MAX));
      lzma_options_bcj opt{};
      opt.start_offset = static_cast<uint32_t>(start);
      chain.bcj.push_back(opt);
      kinds.push_back({id, 'b'});
    } else {
      return Status::Unimplemented("lzma codec: filter id " + std::to_string(id) + " is not one lsio reads");
    }
  }
  chain.Link(kinds);
  const uint64_t mem = lzma_raw_decoder_memusage(chain.filters.data());
  if (mem == UINT64_MAX) return Status::InvalidFormat("lzma codec: liblzma refuses the filter chain");
  if (mem > kRawDecoderMemoryLimit) {
    return Status::Unimplemented("lzma codec: the raw filter chain's decoder needs " + std::to_string(mem) +
                                 " bytes, more than lsio allows (" + std::to_string(kRawDecoderMemoryLimit) + ")");
  }
  return chain;
}

}  // namespace

Result<std::unique_ptr<Codec>> ParseNumcodecsLzmaCodec(const nlohmann::json& config) {
  auto fmt = config.find("format");
  int64_t format = 1;
  if (fmt != config.end() && !fmt->is_null()) {
    if (!fmt->is_number_integer()) return Status::InvalidFormat("lzma codec: \"format\" must be an integer");
    format = fmt->get<int64_t>();
  }
  if (format < 0 || format > 3) {
    return Status::InvalidFormat("lzma codec: \"format\" must be 0 (auto), 1 (xz), 2 (alone) or 3 (raw), got " +
                                 std::to_string(format));
  }
  if (format != 3) return std::unique_ptr<Codec>(new LzmaCodec(std::nullopt));
  LSIO_ASSIGN_OR_RETURN(RawChain chain, ParseRawChain(config));
  return std::unique_ptr<Codec>(new LzmaCodec(std::move(chain)));
}

}  // namespace lsio
