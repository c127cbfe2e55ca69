// lsio/profile.h: where one read call spent its time, for benchmarks that measure the
// serial fraction of a call (benchmarks/python/scaling.py) and project it with Amdahl's law.
//
// Usage:
//   arr->ReadBatch(sels, views);
//   lsio::CallProfile p = lsio::GetLastCallProfile();   // lsio/array.h; this thread's last call
//   double serial = double(p.total_ns - p.workers_ns) / double(p.total_ns);
#pragma once

#include <cstdint>

namespace lsio {

/// total_ns: the whole engine call. workers_ns: inside the parallel phase, where the calling
/// thread and the pool threads read and decode; total_ns - workers_ns is the calling
/// thread's serial share, of which plan_ns went to enumerating the chunk pieces of the
/// selection, resolve_ns to locating chunks (shard-index lookups, descriptor opens, chunk
/// cache lookups) and coalesce_ns to grouping them into reads; the rest is setup.
/// streamed: the chunks were copied into the output with non-temporal stores, as for every
/// box read whose output reaches stream_threshold_bytes (a quarter of the last-level cache).
struct CallProfile {
  uint64_t total_ns = 0;
  uint64_t workers_ns = 0;
  uint64_t plan_ns = 0;
  uint64_t resolve_ns = 0;
  uint64_t coalesce_ns = 0;
  uint32_t waves = 0;
  int workers = 0;     ///< the most workers a wave ran with
  uint64_t units = 0;  ///< I/O units (coalesced reads and fill groups)
  bool streamed = false;
  uint64_t stream_threshold_bytes = 0;
};

}  // namespace lsio
