// blosc's per-thread decode state (DecodeScratch slot kBlosc), declared here for the
// codec's tests, which check which buffers a decode used.
#pragma once

#include <cstddef>

#include "codec/codec.h"
#include "util/aligned_buffer.h"

namespace lsio {

/// For lsio's own unshuffle (blosc.cc): a copy of a frame with its shuffle flag cleared
/// (unless the input may be changed in place), and the byte planes c-blosc decodes it to.
/// Each is about the chunk's size; kept across decodes, trimmed after a read call.
struct BloscScratch final : CodecScratch {
  static constexpr ScratchSlot kSlot = ScratchSlot::kBlosc;
  void Trim(size_t keep) override {
    frame.Trim(keep);
    planes.Trim(keep);
  }
  AlignedBuffer frame;
  AlignedBuffer planes;
};

}  // namespace lsio
