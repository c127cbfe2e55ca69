// The loops each worker of a call runs (executor.cc's WorkerLoop picks one by the store):
// claim I/O units from the call's counter, read them and hand each finished read to call.h.
#pragma once

#include "read/call.h"

namespace lsio {

// Local stores: each worker claims a batch of units, reads it (pread one by one, io_uring
// several in flight) and decodes each read as it completes.
void LocalWorkerLoop(CallState& cs);

// Remote stores: every request waits a first-byte latency (~20 ms on S3), so each worker
// keeps its share of the call's request budget (request_concurrency / workers) in flight
// from start to end, starting the next unit as soon as one of its requests finishes. Batches
// that wait for their slowest request before the next batch starts left the link idle
// between batches (0.73x of a 100 MB/s link bound in W7, where TensorStore reached 0.80x).
// A worker's read buffers stay within cs.batch_bytes (one request may exceed it alone).
void RemoteWorkerLoop(CallState& cs);

// Frees this thread's remote read buffers beyond kArenaKeepBytes in all (after a call).
void TrimRemoteBuffers();

}  // namespace lsio
