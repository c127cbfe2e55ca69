// Writing into the caller's output: a decoded chunk copied into each piece of the output it
// covers (Scatter), and the fill element written where a chunk is missing (Fill), for box
// plans (one strided copy per piece) and outer plans (one run per innermost segment).
#pragma once

#include <cstdint>

#include "read/planner.h"

namespace lsio {

struct CallState;

// Copies the chunk at `src` (C order, chunk shape) into every piece except the direct one.
void Scatter(const CallState& cs, const ChunkTask& t, const uint8_t* src);

// Writes the fill element into every piece of `t`.
void Fill(const CallState& cs, const ChunkTask& t);

}  // namespace lsio
