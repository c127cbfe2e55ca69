// CodecChain: preparation (shape threading, size bookkeeping) and the decode driver.
#include "codec/chain.h"

#include <algorithm>
#include <cstring>

#include "util/strided_copy.h"

namespace lsio {

DecodeScratch& ThreadDecodeScratch() {
  // Plain memory and library contexts, no locks or threads (CodecScratch): a forked child
  // may keep using the copy it inherits on the forking thread.
  thread_local DecodeScratch scratch;
  return scratch;
}

Result<std::unique_ptr<CodecChain>> CodecChain::Build(std::vector<std::unique_ptr<Codec>> codecs,
                                                      const ChunkSpec& decoded) {
  if (codecs.empty()) return Status::InvalidFormat("\"codecs\" must not be empty");

  std::unique_ptr<CodecChain> chain(new CodecChain());
  chain->decoded_ = decoded;
  ChunkSpec spec = decoded;
  const size_t rank = decoded.shape.size();
  std::vector<int> perm(rank);
  for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int>(i);
  bool have_array_to_bytes = false;
  std::string desc;

  for (auto& codec : codecs) {
    if (!desc.empty()) desc += ", ";
    // Each kind class fixes kind() and is the only way to derive from Codec (codec.h), so
    // these casts always name the object's real base.
    switch (codec->kind()) {
      case CodecKind::kArrayToArray: {
        if (have_array_to_bytes) {
          return Status::InvalidFormat("codec '" + codec->name() +
                                       "' (array -> array) after the array -> bytes codec");
        }
        const auto& aa = static_cast<const ArrayToArrayCodec&>(*codec);
        LSIO_ASSIGN_OR_RETURN(spec, aa.EncodedSpec(spec));
        std::optional<std::vector<int>> order = aa.AxisOrder(rank);
        if (!order) {
          return Status::Unimplemented("array -> array codec '" + codec->name() +
                                       "' is not an axis permutation; lsio cannot decode it yet");
        }
        // encoded[b] = previous[a], b[i] = a[order[i]]; compose with what came before.
        std::vector<int> next(rank);
        for (size_t i = 0; i < rank; ++i) next[i] = perm[static_cast<size_t>((*order)[i])];
        perm = next;
        desc += codec->name();
        break;
      }
      case CodecKind::kArrayToBytes: {
        if (have_array_to_bytes) return Status::InvalidFormat("more than one array -> bytes codec");
        have_array_to_bytes = true;
        const bool big = static_cast<const ArrayToBytesCodec&>(*codec).big_endian();
        chain->swap_ = big && decoded.swap_unit > 1;
        desc += codec->name() + (big ? "(big)" : "");
        break;
      }
      case CodecKind::kBytesToBytes: {
        if (!have_array_to_bytes) {
          return Status::InvalidFormat("codec '" + codec->name() +
                                       "' (bytes -> bytes) before the array -> bytes codec");
        }
        desc += codec->name();
        chain->bb_.emplace_back(static_cast<BytesToBytesCodec*>(codec.release()));
        break;
      }
    }
  }
  if (!have_array_to_bytes) return Status::InvalidFormat("codecs lack an array -> bytes codec (e.g. \"bytes\")");

  chain->encoded_ = spec;
  bool identity = true;
  for (size_t i = 0; i < rank; ++i) identity &= perm[i] == static_cast<int>(i);
  if (!identity) chain->perm_ = perm;

  chain->sizes_.push_back(spec.num_bytes());
  chain->max_stored_ = spec.num_bytes();
  uint64_t codec_scratch = 0;
  for (const auto& c : chain->bb_) {
    chain->max_sizes_.push_back(chain->max_stored_);
    const uint64_t bound = c->MaxEncodedSize(chain->max_stored_);
    codec_scratch = std::max(codec_scratch, c->DecodeScratchBytes(chain->max_stored_, bound));
    chain->max_stored_ = bound < chain->max_stored_ ? UINT64_MAX : bound;  // saturate on overflow
    const auto& prev = chain->sizes_.back();
    chain->sizes_.push_back(prev ? c->EncodedSize(*prev) : std::nullopt);
  }
  chain->stored_is_decoded_ = chain->perm_.empty() && !chain->swap_ && chain->bb_.empty();
  // Saturating: a chain whose bounds overflowed reports UINT64_MAX (memory_limit refuses it).
  const uint64_t stages = chain->stored_is_decoded_ ? 0 : 3 * chain->decoded_size();
  chain->decode_scratch_ = codec_scratch > UINT64_MAX - stages ? UINT64_MAX : stages + codec_scratch;
  const auto& bb = chain->bb_;
  if (chain->perm_.empty() && !chain->swap_ && !bb.empty() &&
      (bb.size() == 1 || (bb.size() == 2 && bb[1]->name() == "crc32c"))) {
    const std::string& c = bb[0]->name();
    if (c == "zstd") chain->gpu_codec_ = GpuCodec::kZstd;
    else if (c == "gzip") chain->gpu_codec_ = GpuCodec::kDeflate;
    else if (c == "numcodecs.lz4") chain->gpu_codec_ = GpuCodec::kLz4;
  }
  chain->description_ = desc;
  return chain;
}

Status CodecChain::Decode(std::span<const uint8_t> in, uint8_t* out, DecodeScratch& scratch,
                          bool in_writable) const {
  const uint64_t raw_size = *sizes_[0];
  std::span<const uint8_t> cur = in;
  int cur_buf = -1;  // which scratch.buf holds `cur` (-1: caller memory or `out`)
  bool cur_writable = in_writable;

  for (size_t k = bb_.size(); k-- > 0;) {
    BytesOut o;
    const int target = cur_buf == 0 ? 1 : 0;
    if (sizes_[k]) {
      if (k == 0 && perm_.empty()) {
        o.fixed = out;  // the last stage writes straight into the destination
      } else {
        if (!scratch.buf[target].Reserve(*sizes_[k])) {
          return Status::ResourceExhausted("cannot allocate " + std::to_string(*sizes_[k]) +
                                           " bytes of decode scratch");
        }
        o.fixed = scratch.buf[target].data();
      }
      o.size = *sizes_[k];
    } else {
      o.grow = &scratch.buf[target];
      o.limit = max_sizes_[k];
    }
    o.in_writable = cur_writable;
    LSIO_RETURN_IF_ERROR(bb_[k]->DecodeBytes(cur, o, scratch));
    // A result inside `cur` (crc32c strips) keeps its writability; the chain's own scratch
    // is writable, the caller's `out` is left alone.
    const auto at = reinterpret_cast<uintptr_t>(o.result.data()), from = reinterpret_cast<uintptr_t>(cur.data());
    const bool inside_cur = at >= from && at < from + cur.size();
    if (o.result.data() != cur.data() && o.result.data() != out) cur_buf = target;
    else if (o.result.data() == out) cur_buf = -1;
    if (!inside_cur) cur_writable = cur_buf >= 0;
    cur = o.result;
  }

  if (cur.size() != raw_size) {
    return Status::DataLoss("chunk has " + std::to_string(cur.size()) + " bytes after decoding, expected " +
                            std::to_string(raw_size));
  }
  const size_t itemsize = decoded_.itemsize;
  if (perm_.empty()) {
    if (cur.data() != out) std::memcpy(out, cur.data(), raw_size);
    if (swap_) ByteSwapInPlace(out, raw_size / decoded_.swap_unit, decoded_.swap_unit);
    return Status::Ok();
  }
  // Walk the encoded (transposed) chunk in C order and scatter into the decoded layout.
  const size_t rank = decoded_.shape.size();
  std::vector<int64_t> dec_strides(rank), src_strides(rank), dst_strides(rank);
  int64_t s = static_cast<int64_t>(itemsize);
  for (size_t d = rank; d-- > 0;) {
    dec_strides[d] = s;
    s *= decoded_.shape[d];
  }
  s = static_cast<int64_t>(itemsize);
  for (size_t d = rank; d-- > 0;) {
    src_strides[d] = s;
    s *= encoded_.shape[d];
  }
  for (size_t i = 0; i < rank; ++i) dst_strides[i] = dec_strides[static_cast<size_t>(perm_[i])];
  CopyStrided(out, dst_strides.data(), cur.data(), src_strides.data(), encoded_.shape.data(),
              static_cast<int>(rank), itemsize, swap_ ? decoded_.swap_unit : 1);
  return Status::Ok();
}

Status CodecChain::GpuFrame(std::span<const uint8_t> in, std::span<const uint8_t>* frame) const {
  *frame = in;
  if (bb_.size() < 2) return Status::Ok();
  BytesOut o;  // crc32c returns a view of its input
  LSIO_RETURN_IF_ERROR(bb_[1]->DecodeBytes(in, o, ThreadDecodeScratch()));
  *frame = o.result;
  return Status::Ok();
}

}  // namespace lsio
