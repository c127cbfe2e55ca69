// Memory and wave budgets of a read call; see budget.h.
#include "read/budget.h"

#include <algorithm>
#include <string>

namespace lsio {
namespace {

std::string HumanBytes(uint64_t b) {
  return b >= (10ull << 20) ? std::to_string(b >> 20) + " MiB"
                            : b >= (10ull << 10) ? std::to_string(b >> 10) + " KiB" : std::to_string(b) + " bytes";
}

}  // namespace

Status FitMemory(const ReadContext& ctx, const Plan& plan, int* workers, uint64_t* batch_bytes) {
  *batch_bytes = ctx.batch_bytes;
  if (ctx.memory_limit == 0) return Status::Ok();
  const CodecChain& chain = *ctx.layout->chain;
  uint64_t max_unit = 0;
  uint64_t total_buffered = 0;
  for (const IoUnit& u : plan.units) {
    if (u.file < 0 || u.dst != nullptr) continue;
    max_unit = std::max(max_unit, u.length);
    total_buffered += u.length;
  }
  // Decoded chunk + two ping-pong stage buffers (each at most about the decoded size), and
  // what codecs keep of their own (blosc's byte planes and frame copy).
  const uint64_t scratch = chain.decode_scratch_bytes();
  const uint64_t plan_bytes = plan.tasks.capacity() * sizeof(ChunkTask) + plan.pieces.capacity() * sizeof(Piece) +
                              plan.coords.capacity() * sizeof(int64_t) + plan.segments.capacity() * sizeof(Segment) +
                              plan.groups.capacity() * sizeof(SegmentGroup) +
                              plan.piece_groups.capacity() * sizeof(uint32_t) +
                              plan.units.capacity() * sizeof(IoUnit) + plan.unit_tasks.capacity() * sizeof(uint32_t);
  uint64_t need = 0;
  for (int w = *workers; w >= 1; --w) {
    for (uint64_t batch : {ctx.batch_bytes, uint64_t{1}}) {
      const uint64_t arena = std::min(total_buffered, batch + max_unit);
      uint64_t per_worker = 0;
      if (__builtin_add_overflow(arena, scratch, &per_worker) ||
          __builtin_mul_overflow(per_worker, static_cast<uint64_t>(w), &need) ||
          __builtin_add_overflow(need, plan_bytes, &need)) {
        need = UINT64_MAX;
      }
      if (need <= ctx.memory_limit) {
        *workers = w;
        *batch_bytes = batch;
        return Status::Ok();
      }
    }
  }
  const auto human = HumanBytes;
  return Status::ResourceExhausted("this read needs about " + human(need) + " of buffers (largest read " +
                                   human(max_unit) + ", decoded chunk " + human(chain.decoded_size()) +
                                   "), over the memory limit of " + human(ctx.memory_limit) +
                                   ": read a smaller region, lower max_request, or raise memory_limit");
}

Status CheckPlanBound(const ReadContext& ctx, const PlanBound& bound) {
  if (ctx.memory_limit == 0 || bound.bytes <= ctx.memory_limit) return Status::Ok();
  return Status::ResourceExhausted(
      "planning this read needs up to " + HumanBytes(bound.bytes) + " (" + std::to_string(bound.pieces) +
      " chunk pieces), over the memory limit of " + HumanBytes(ctx.memory_limit) +
      ": read fewer crops or indices at once, or raise memory_limit");
}

uint64_t OneReadCapacity(const ArrayLayout& l) {
  constexpr uint64_t kMaxCapacity = 16u << 20;
  const uint64_t bound = l.chain->stored_is_decoded() ? l.chain->decoded_size() : l.chain->max_stored_size();
  return bound <= kMaxCapacity ? bound : 0;
}

size_t WaveBudget(const ReadContext& ctx, const StoreTraits& traits, bool one_read) {
  // Chunk files opened by their reads hold a descriptor only while a worker reads them.
  if (one_read && traits.opens_on_read && !ctx.layout->sharded && OneReadCapacity(*ctx.layout) != 0) {
    return SIZE_MAX;
  }
  size_t budget = std::max<size_t>(4, traits.open_budget);
  if (!ctx.layout->sharded && ctx.store->LocatesKeys()) {
    // A manifest: the budget counts distinct objects (WaveResolver), whose chunks are ranges
    // of them; every chunk of an object already in the wave comes free.
    return budget;
  }
  if (traits.remote && !ctx.layout->sharded) {
    const size_t in_flight = static_cast<size_t>(std::max(1, ctx.threads)) * std::max(1u, traits.max_in_flight);
    budget = std::min(budget, std::max<size_t>(4, in_flight));
  }
  return budget;
}
}  // namespace lsio
