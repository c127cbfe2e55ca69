// What a read call may hold: memory (the plan and each worker's read and decode buffers,
// within ReadContext::memory_limit) and open objects per resolve wave.
#pragma once

#include <cstddef>
#include <cstdint>

#include "read/executor.h"

namespace lsio {

// Fails before planning when even the plan's upper bound exceeds ctx.memory_limit.
Status CheckPlanBound(const ReadContext& ctx, const PlanBound& bound);

// Chooses workers and batch size so that the plan plus every worker's read buffer and decode
// scratch stay within ctx.memory_limit; fails before any read if even one worker cannot.
Status FitMemory(const ReadContext& ctx, const Plan& plan, int* workers, uint64_t* batch_bytes);

// Unsharded chunks opened by their read (Store::OpenForOneRead) are read into a buffer of
// this many bytes, their size being unknown until then: all a chunk may hold. 0: chunks are
// opened and sized while resolving instead, where that buffer would be large (an open per
// file matters only for small chunks; a buffer sized by the bound and not by the file could
// be far larger than the file, up to unallocatable for a forged huge shape).
uint64_t OneReadCapacity(const ArrayLayout& l);

// Objects per wave. Unsharded chunks of a remote store are fetched whole while resolving
// and held until the wave is decoded: keep that to what the workers have in flight anyway.
size_t WaveBudget(const ReadContext& ctx, const StoreTraits& traits, bool one_read);

}  // namespace lsio
