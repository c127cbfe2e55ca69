"""W14: batches of random records from a zrecord store (lsio.records) vs ArrayRecord.

The same records (sizes uniform in 1-16 KiB; the bytes are uint16 "tokens" drawn from a Zipf
law, so zstd compresses them about as much as tokenized text) are written to an lsio.records
store, to an ArrayRecord file (Grain's format; ``group_size:1`` so each record is its own
compressed chunk, as Grain recommends for random access) and, uncompressed, to one flat file
with an offsets array (the numpy memmap baseline). Each reader gathers batches of 1,024
random record ids, 2 threads:

- lsio: ``r.take(ids)`` (one gathered buffer + offsets), and ``r.take(ids, copy=False)``
  (views of the mapped chunk files; uncompressed only);
- ArrayRecord: ``ArrayRecordReader.read(ids)`` with ``readahead_buffer_size:0`` and
  ``max_parallelism:2`` (Grain's random-access settings), a list of bytes;
- memmap: ``np.concatenate([mm[o:o + n] for ...])`` over ``np.memmap`` and the offsets
  (uncompressed only).

Hot: page cache warm, ``--rounds`` rounds of ``--batches`` batches, median. Cold: every file
of the reader dropped from the page cache (posix_fadvise DONTNEED) before each batch. The
views reader has no cold row (its views read nothing until touched), and its mappings are
released before the cold rows (pages a mapping holds are not dropped). The
first batch of every reader is checked against the records written (a mismatch exits 1).
Append: the records written in calls of 1,024 (lsio: durable publication per call, and
``durable=False``), GB/s of record bytes.

Target (issue "Records"): lsio >= 2x ArrayRecord on every row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def log(msg: str = "") -> None:
    print(msg, flush=True)


def make_records(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1024, 16 * 1024 + 1, n) // 2 * 2
    tokens = np.minimum(rng.zipf(1.3, int(sizes.sum()) // 2), 50000).astype("<u2")
    out, at = [], 0
    for s in sizes:
        out.append(tokens[at:at + s // 2].tobytes())
        at += s // 2
    return out


def drop(paths) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd) if os.access(p, os.W_OK) else None
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def files_under(path: Path) -> list:
    if path.is_file():
        return [str(path)]
    return [str(p) for p in path.rglob("*") if p.is_file()]


def write_all(records, comp, d: Path, threads: int):
    import lsio.records as R
    from array_record.python import array_record_module as arm

    out = {}
    total = sum(len(r) for r in records)
    for durable in (True, False):
        p = d / f"lsio_{comp}_{'durable' if durable else 'nosync'}"
        shutil.rmtree(p, ignore_errors=True)
        t = time.perf_counter()
        r = R.create(p, bytes, compression=comp, durable=durable, threads=threads)
        for a in range(0, len(records), 1024):
            r.append(records[a:a + 1024])
        r.close()
        out[f"lsio append ({'durable' if durable else 'durable=False'})"] = total / (time.perf_counter() - t) / 1e9
    ap = d / f"records_{comp}.array_record"
    t = time.perf_counter()
    w = arm.ArrayRecordWriter(str(ap), "group_size:1," + ("zstd:3" if comp else "uncompressed"))
    for rec in records:
        w.write(rec)
    w.close()
    out["ArrayRecord write"] = total / (time.perf_counter() - t) / 1e9
    flat = d / "records_flat.bin"
    if comp is None:
        with open(flat, "wb") as f:
            for rec in records:
                f.write(rec)
        np.save(d / "records_flat_offsets.npy", np.cumsum([0] + [len(r) for r in records]).astype(np.int64))
    # The durable store is the one read.
    shutil.rmtree(d / f"lsio_{comp}", ignore_errors=True)
    os.rename(d / f"lsio_{comp}_durable", d / f"lsio_{comp}")
    shutil.rmtree(d / f"lsio_{comp}_nosync", ignore_errors=True)
    return out


def readers(comp, d: Path, threads: int):
    import lsio.records as R
    from array_record.python import array_record_module as arm

    r = R.open(d / f"lsio_{comp}", threads=threads)
    store_files = files_under(d / f"lsio_{comp}")
    out = {"lsio": (lambda ids: r.take(ids), store_files)}
    if comp is None:
        rv = R.open(d / f"lsio_{comp}", threads=threads)  # its own mappings (dropped before cold rows)
        out["lsio (copy=False views)"] = (lambda ids: rv.take(ids, copy=False), store_files)
        held: dict = {}
        # Pages a mapping holds survive the cold drop: cold batches start with no mapping.
        out["_unmap"] = lambda: (rv._maps.clear(), held.clear())
    ap = str(d / f"records_{comp}.array_record")
    rd = arm.ArrayRecordReader(ap, f"readahead_buffer_size:0,max_parallelism:{threads}")
    out["ArrayRecord"] = (lambda ids: rd.read(ids.tolist()), [ap])
    if comp is None:
        offs = np.load(d / "records_flat_offsets.npy")
        flat = d / "records_flat.bin"

        def memmap_read(ids):
            if "mm" not in held:
                held["mm"] = np.memmap(flat, dtype=np.uint8, mode="r")
            mm = held["mm"]
            return np.concatenate([mm[offs[i]:offs[i + 1]] for i in ids])
        out["numpy memmap + offsets"] = (memmap_read, [str(d / "records_flat.bin")])
    return out


def as_list(result) -> list:
    if isinstance(result, np.ndarray):
        return [result.tobytes()]
    if isinstance(result, list):
        return [bytes(x) for x in result]
    return [bytes(x) for x in result]  # RecordBatch of a bytes store: bytes per record


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=40000, help="records in the dataset (default 40,000: ~340 MB)")
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20, help="batches per hot round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cold-batches", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--caches", default="hot,cold")
    ap.add_argument("--compressions", default="none,zstd")
    ap.add_argument("--dir", type=Path, default=HERE.parent / ".cache" / "w14")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    records = make_records(args.records, 14)
    total = sum(len(x) for x in records)
    log(f"W14: {len(records)} records, {total / 1e6:.0f} MB, batches of {args.batch}, {args.threads} threads")
    rows, appends = [], {}
    rng = np.random.default_rng(141)
    for comp_name in args.compressions.split(","):
        comp = None if comp_name == "none" else comp_name
        appends[comp_name] = write_all(records, comp, args.dir, args.threads)
        log(f"[{comp_name}] append GB/s: " + ", ".join(f"{k} {v:.2f}" for k, v in appends[comp_name].items()))
        rs = readers(comp, args.dir, args.threads)
        unmap = rs.pop("_unmap", lambda: None)
        check = rng.integers(0, len(records), args.batch)
        want = [records[i] for i in check]
        for name, (fn, _) in rs.items():
            got = as_list(fn(check))
            if name == "numpy memmap + offsets":
                got_ok = got[0] == b"".join(want)
            else:
                got_ok = got == want
            if not got_ok:
                log(f"MISMATCH: {name} ({comp_name})")
                return 1
            log(f"  {name}: first batch checked")
        for cache in args.caches.split(","):
            rates = {name: [] for name in rs}
            if cache == "hot":
                for name, (fn, _) in rs.items():
                    fn(check)  # warm
                for rnd in range(args.rounds):
                    batches = [rng.integers(0, len(records), args.batch) for _ in range(args.batches)]
                    order = list(rs)[rnd % len(rs):] + list(rs)[:rnd % len(rs)]
                    for name in order:
                        fn = rs[name][0]
                        t = time.perf_counter()
                        for b in batches:
                            fn(b)
                        rates[name].append(args.batch * len(batches) / (time.perf_counter() - t))
            else:
                # Views read nothing until touched, and pages a mapping holds are not dropped:
                # the views reader has no cold row.
                rates.pop("lsio (copy=False views)", None)
                unmap()
                for rnd in range(args.cold_batches):
                    b = rng.integers(0, len(records), args.batch)
                    for name, (fn, files) in rs.items():
                        if name not in rates:
                            continue
                        unmap()
                        drop(files)
                        t = time.perf_counter()
                        fn(b)
                        rates[name].append(args.batch / (time.perf_counter() - t))
            ar = statistics.median(rates["ArrayRecord"])
            for name, rr in rates.items():
                med = statistics.median(rr)
                rows.append({"workload": "W14", "compression": comp_name, "cache": cache, "reader": name,
                             "records_per_s": med, "mb_per_s": med * total / len(records) / 1e6,
                             "vs_array_record": med / ar, "runs": rr})
                log(f"[{comp_name} {cache}] {name:28s} {med:10.0f} records/s  {med * total / len(records) / 1e6:7.0f} MB/s"
                    f"  {med / ar:5.2f}x ArrayRecord")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "append_gb_s": appends, "records": len(records),
                                         "bytes": total, "threads": args.threads}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
