"""Reporting for the benchmark suite (suite.py): console lines, markdown tables, PNG, RESULTS.md.

    report.short_line(row)        one progress line per result row
    report.markdown(doc)          the tables (throughput, memory, targets) from results.json's doc
    report.plot(doc, path)        bar charts of MB/s per workload (matplotlib, Agg backend)
    report.results_md(doc, md)    benchmarks/RESULTS.md: date, machine, command, tables, notes

Throughput rows: units/s is crops/s or inner chunks/s (column "rate"); MB/s is decoded output
bytes per second for every row, limits included (a raw-read limit's own bytes/s of compressed
data is kept in the JSON as read_MBps), so every row compares on the same scale.
"lsio/x" is lsio's rate divided by row x's; "vs limit" is the row's rate divided by the
workload's primary limit (W2: the faster raw read, others: libzstd x threads).
"""

from __future__ import annotations

from pathlib import Path

MiB = 2**20


def _fmt_rate(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    return f"{v:,.1f}"


def short_line(row: dict) -> str:
    name = f"{row['reader']:<29} t={row['threads']}"
    if row.get("status") != "ok":
        return f"{name}  {row.get('status')}"
    if "peak_bytes" in row:
        return (f"{name}  peak {row['peak_bytes'] / MiB:,.0f} MiB (out {row['out_bytes'] / MiB:,.0f} MiB, "
                f"baseline {row['baseline_bytes'] / MiB:,.0f} MiB, delta {row['delta_bytes'] / MiB:,.0f} MiB), "
                f"{row['seconds']:.2f} s")
    if "units_per_s" not in row:
        return f"{name}  no timed rounds"
    extra = f", read {row['read_MBps']:,.0f} MB/s" if "read_MBps" in row else ""
    return (f"{name}  {_fmt_rate(row['units_per_s'])} {row['unit']}/s, {row['MBps']:,.0f} MB/s "
            f"(median {row['median_s'] * 1e3:.2f} ms of {len(row['times_s'])}{extra}) check={row.get('check')}")


def markdown(doc: dict) -> str:
    rows = [r for r in doc["rows"] if r["workload"] not in ("W6", "W7", "W13")]
    lines = ["| workload | cache | reader | threads | rate | MB/s | lsio/x | vs limit | target | check |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        status = r.get("status", "")
        if status == "ok" and "units_per_s" in r:
            rate = f"{_fmt_rate(r['units_per_s'])} {r['unit']}/s"
            mbps = f"{r['MBps']:,.0f}"
        else:
            rate, mbps = status or "-", "-"
        ratio = f"{r['lsio_ratio']:.2f}x" if "lsio_ratio" in r else ""
        vs = f"{r['vs_limit']:.2f}" if "vs_limit" in r and r.get("kind") != "limit" else ""
        reader = f"*{r['reader']}*" if r.get("kind") == "limit" else r["reader"]
        check = r.get("check", "-") if status == "ok" or str(status).startswith("MISMATCH") else "-"
        lines.append(f"| {r['workload']} | {r['cache']} | {reader} | {r['threads']} | {rate} | {mbps} | {ratio} "
                     f"| {vs} | {r.get('target', '')} | {check} |")
    out = ["## Throughput (medians)", "", *lines, ""] if rows else []
    mem = [r for r in doc["rows"] if r["workload"] == "W6"]
    if mem:
        size = next((r["out_bytes"] for r in mem if "out_bytes" in r), 0)
        out += [f"## Memory (W6): whole {size / MiB:,.0f} MiB array read once, one process per reader", "",
                "| reader | threads | peak RSS MiB | output MiB | baseline MiB | peak - baseline MiB | seconds | target | check |",
                "|---|---|---|---|---|---|---|---|---|"]
        for r in mem:
            if r.get("status") == "ok":
                out.append(f"| {r['reader']} | {r['threads']} | {r['peak_bytes'] / MiB:,.0f} | {r['out_bytes'] / MiB:,.0f} "
                           f"| {r['baseline_bytes'] / MiB:,.0f} | {r['delta_bytes'] / MiB:,.0f} | {r['seconds']:.2f} "
                           f"| {r.get('target', '')} | {r.get('check')} |")
            else:
                out.append(f"| {r['reader']} | {r['threads']} | {r.get('status')} | | | | | | |")
        out += ["", "lsio's baseline includes its preallocated, touched `out`; peers allocate their result "
                "during the read, so their peak - baseline includes the output.", ""]
    remote = [r for r in doc["rows"] if r["workload"] == "W7"]
    if remote:
        out += w7_section(doc, remote)
    zp = [r for r in doc["rows"] if r["workload"] == "W13"]
    if zp:
        out += w13_section(doc, zp)
    if doc.get("targets"):
        out += ["## Targets", "", "| workload | cache | threads | reader | target | result |", "|---|---|---|---|---|---|"]
        for v in doc["targets"]:
            out.append(f"| {v['workload']} | {v['cache']} | {v['threads']} | {v['reader']} | {v['target']} | "
                       f"{'met' if v['met'] else 'missed'} ({v['detail']}) |")
        out.append("")
    out += ["## Stores", "", "| store | layout | raw MiB | stored MiB | compression |", "|---|---|---|---|---|"]
    for k, s in doc["stores"].items():
        out.append(f"| {k} | {s['spec']} | {s['raw_bytes'] / MiB:,.0f} | {s['stored_bytes'] / MiB:,.0f} | {s['ratio']:.2f}x |")
    out.append("")
    notes = notes_lines(doc)
    if notes:
        out += ["## Notes", "", *notes, ""]
    return "\n".join(out)


def w7_section(doc: dict, rows: list[dict]) -> list[str]:
    """W7: crops/s, requests per batch, bytes fetched per byte used, first-batch latency."""
    det = (doc.get("workloads", {}).get("W7", {}).get("details") or [{}])[0]
    out = [f"## Remote (W7): the W1 crops over HTTP, {det.get('latency_ms', '?'):g} ms to first byte "
           "(object_server.py on loopback)", "",
           "| group | reader | crops/s | MB/s | lsio/x | requests/batch | MB fetched/batch | fetched/used "
           "| first batch (open + 1 batch) | max in flight | target | check |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st = r.get("status", "")
        reader = f"*{r['reader']}*" if r.get("kind") == "limit" else r["reader"]
        if "units_per_s" in r and st == "ok":
            rate, mbps = _fmt_rate(r["units_per_s"]), f"{r['MBps']:,.0f}"
            if r.get("slow"):
                rate += f" (1 round: warm-up {r.get('warmup_s', 0):.1f} s)"
        else:
            rate, mbps = (st or "-"), "-"
        req = f"{r['requests_per_batch']:,.0f}" if "requests_per_batch" in r else ""
        if "lsio_requests_per_batch" in r:
            req += f" ({r['lsio_requests_per_batch']:,.0f})"
        mb = f"{r['bytes_per_batch'] / 1e6:,.1f}" if "bytes_per_batch" in r else (
            f"{r['needed_bytes_per_batch'] / 1e6:,.1f} needed" if "needed_bytes_per_batch" in r else "")
        fpu = f"{r['fetched_per_used']:.2f}" if "fetched_per_used" in r else ""
        first = f"{r['first_batch_s'] * 1e3:,.0f} ms ({r['first_batch_requests']:,.0f} req)" if "first_batch_s" in r else ""
        ratio = f"{r['lsio_ratio']:.2f}x" if "lsio_ratio" in r else ""
        if "vs_limit" in r:
            ratio += f"{'; ' if ratio else ''}{r['vs_limit']:.2f}x link"
        infl = str(r.get("in_flight_max", ""))
        check = r.get("check", "-") if r.get("kind") != "limit" else "n/a"
        out.append(f"| {r['cache']} | {reader} | {rate} | {mbps} | {ratio} | {req} | {mb} | {fpu} | {first} | {infl} "
                   f"| {r.get('target', '')} | {check} |")
    methods = sorted({r["cap_method"] for r in rows if r.get("cap_method")})
    pv = det.get("peer_versions")
    needed = next((r["needed_bytes_per_batch"] for r in rows if "needed_bytes_per_batch" in r), None)
    out += ["", "Requests and bytes are the server's counts per timed batch (medians), for every reader alike; "
            "lsio's own `Array.stats()` count is in parentheses. fetched/used = body bytes sent / compressed bytes "
            "of the chunks the batch needs" + (f" ({needed / 1e6:,.1f} MB per batch)" if needed else "")
            + ", shard indexes not counted as needed. First batch: a fresh reader object opened on the URL plus "
            "its first batch (median of a few tries; process-wide connection pools stay warm). Max in flight: "
            "the most requests the server saw at once. lsio/x: lsio's crops/s over the row's; link: over the "
            "capped link bound (cap / needed bytes)."]
    for m in methods:
        out.append(f"Bandwidth cap: {m}.")
    if pv:
        out.append("Remote peers: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in pv.items()) + ".")
    out.append("")
    return out


W13_HEADING = "## zarr-python's API with each codec pipeline (W13)"


def w13_section(doc: dict, rows: list[dict]) -> list[str]:
    """W13: one row per case and pipeline (plus lsio's own API as the reference)."""
    det = (doc.get("workloads", {}).get("W13", {}).get("details") or [{}])[0]
    out = [W13_HEADING, "",
           "| case | reader | threads | rate | MB/s | lsio pipeline/x | target | check |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st = r.get("status", "")
        if st == "ok" and "units_per_s" in r:
            rate, mbps = f"{_fmt_rate(r['units_per_s'])} {r['unit']}/s", f"{r['MBps']:,.0f}"
        else:
            rate, mbps = st or "-", "-"
        reader = f"*{r['reader']}*" if r.get("kind") == "reference" else r["reader"]
        ratio = f"{r['lsio_ratio']:.2f}x" if "lsio_ratio" in r else ""
        check = r.get("check", "-") if st == "ok" or str(st).startswith("MISMATCH") else "-"
        out.append(f"| {r.get('case')} | {reader} | {r['threads']} | {rate} | {mbps} | {ratio} "
                   f"| {r.get('target', '')} | {check} |")
    v = det.get("versions") or {}
    out += ["", "Each call goes through zarr-python's own API; *lsio native* is lsio's API on the same data "
            "(the reference every result is checked against bit for bit). Crops: W1's batches (16 (4,256,256) "
            "float32 crops) as 16 `z[box]` calls; chunks: W3's single 64^3 inner-chunk reads as `z.oindex[box]`; "
            "xarray: W1's crops as `xr.open_zarr(..., chunks=None)[var].isel(...).values`; calls spread over "
            f"{det.get('python_threads', '?')} Python threads. dask mean: `dask.array.from_zarr(z, chunks=shards)"
            ".mean()` over W5's array, threaded scheduler. zarr config for every pipeline: "
            + ", ".join(f"`{k}={x}`" for k, x in (det.get("zarr_config") or {}).items()) + ".",
            "Versions: " + ", ".join(f"{k} {x or 'not installed'}" for k, x in v.items()) + ".", ""]
    return out


def notes_lines(doc: dict) -> list[str]:
    n = []
    v = doc.get("versions", {})
    why = doc.get("unavailable", {})
    n.append("- Readers: " + ", ".join(f"{k} {x}" if x else f"{k}: {why.get(k, 'not installed')}"
                                       for k, x in v.items()) + ".")
    cc = doc.get("cold_check")
    if cc:
        n.append(f"- Cold check ({cc['store']}): {cc['resident_before'] / MiB:,.0f} MiB of {cc['bytes'] / MiB:,.0f} MiB "
                 f"resident after reading it, {cc['resident_after'] / MiB:,.1f} MiB after "
                 f"posix_fadvise(POSIX_FADV_DONTNEED) (mincore): {'ok' if cc['ok'] else 'FAILED'}. "
                 "Cold rows reopen every reader and drop the store before each round.")
    io = doc.get("io_uring", {})
    if not io.get("available", True):
        n.append(f"- io_uring unavailable here: {io.get('reason')}.")
    fio = doc.get("fio")
    if fio:
        if fio.get("available") and "MBps" in fio:
            n.append(f"- fio cross-check (cold, O_DIRECT io_uring QD32, random reads): {fio['MBps']:,.0f} MB/s, "
                     f"{fio['iops']:,.0f} IOPS (`{fio['cmd']}`).")
        else:
            n.append(f"- fio: {fio.get('note') or fio.get('error')}.")
    bad = [r for r in doc["rows"] if str(r.get("status", "")).startswith(("MISMATCH", "error"))]
    for r in bad:
        n.append(f"- **{r['workload']} {r['reader']} (threads {r['threads']}): {r['status']}**")
    n.append("- Peers return their crops as a list of arrays (never stacked), lsio fills one preallocated "
             "array; limits are in output-equivalent MB/s (raw reads: the batch's compressed chunk byte "
             "ranges, plus shard indexes when cold, and cold also *merged*: neighbours within lsio's "
             "default max_gap read as one range (up to its max_request), gaps included, like a coalescing reader; zstd: single-thread decode of the same chunks times "
             "the thread count; memcpy: output size, one thread).")
    return n


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker  # noqa: F401

    groups: dict[tuple, list[dict]] = {}
    for r in doc["rows"]:
        if r["workload"] == "W6" or r.get("status") != "ok" or "MBps" not in r:
            continue
        groups.setdefault((r["workload"], r.get("case") or r["cache"], r["threads"]), []).append(r)
    mem = [r for r in doc["rows"] if r["workload"] == "W6" and r.get("status") == "ok"]
    n = len(groups) + (1 if mem else 0)
    if n == 0:
        return
    cols = 2 if n > 1 else 1
    nrows = (n + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(7 * cols, 2.6 * nrows + 0.6), squeeze=False)
    flat = [a for row in axes for a in row]
    for ax, ((wid, cache, threads), rs) in zip(flat, sorted(groups.items())):
        names = [r["reader"] for r in rs]
        vals = [r["MBps"] for r in rs]
        colors = ["#999999" if r["kind"] == "limit" else ("#1f77b4" if r["reader"].startswith("lsio") else "#ff7f0e")
                  for r in rs]
        ax.barh(range(len(rs)), vals, color=colors)
        ax.set_yticks(range(len(rs)), names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("MB/s of output (log)", fontsize=7)
        ax.set_title(f"{wid} {cache}, {threads} thread{'s' if threads > 1 else ''}", fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    if mem:
        ax = flat[len(groups)]
        ax.barh(range(len(mem)), [r["peak_bytes"] / MiB for r in mem],
                color=["#1f77b4" if r["reader"].startswith("lsio") else "#ff7f0e" for r in mem])
        ax.axvline(mem[0]["out_bytes"] / MiB + 64, color="k", ls="--", lw=1)
        ax.set_yticks(range(len(mem)), [r["reader"] for r in mem], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("peak RSS MiB (dashed: output + 64 MiB)", fontsize=7)
        ax.set_title("W6 memory", fontsize=9)
    for ax in flat[n:]:
        ax.axis("off")
    fig.suptitle(f"lsio benchmarks ({doc['mode']}, {doc['date']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_md(doc: dict, md: str) -> str:
    m = doc["machine"]
    d = m.get("disk", {})
    disk = ", ".join(f"{k} {v}" for k, v in d.items() if v not in ("", None))
    head = [
        "# Benchmark results",
        "",
        "Written by `benchmarks/python/suite.py` (see benchmarks/README.md). Figures are medians of "
        "interleaved rounds on a shared machine: compare rows within one run, quote ratios.",
        "",
        f"- Date: {doc['date']}",
        f"- Command: `{doc['command']}` ({doc['mode']} mode, {doc['elapsed_s'] / 60:.1f} min)",
        f"- Machine: {m.get('cpu_model', '?')}; {m.get('cpus_usable')} usable CPUs of {m.get('cpus')}; "
        f"{m.get('ram_gib', '?')} GiB RAM; disk: {disk}; kernel {m.get('kernel')}; Python {m.get('python')}",
        f"- Threads: {doc['args'].get('threads')} for every reader (W3 also 1)",
        "",
    ]
    return "\n".join(head) + "\n" + md + "\n"


W7_HEADING = "## Remote (W7)"

# Sections written by hand from runs of the standalone scripts (scaling.py, w9.py, w7_cache.py, w10.py): a run of the
# suite rewrites RESULTS.md but keeps these, inserted before "## Targets".
STANDALONE_HEADINGS = ("## Thread scaling and the serial share of a call", "## Decoded-chunk cache (W9)",
                       "## Remote disk cache (W7, cold vs warm)", "## Checkpoints (W10)",
                       "## DataLoader feed (lsio.torch workers vs in-process)",
                       "## Per-call overhead (one tiny chunk per call)",
                       "## Two-thread rows against every stage of a read (issue 13's 2-thread targets)",
                       "## Decoding on the GPU", "## NetCDF4 through kerchunk references (W11",
                       "## Icechunk (W12)", "## Larger than memory (W2b)", "## Sharded JAX checkpoints (W15)",
                       "## Records (W14)")


def _target_rows(lines: list[str]) -> tuple[int, int]:
    """[start, end) of the Targets table's body rows in `lines` (empty when absent)."""
    t = next((i for i, x in enumerate(lines) if x.startswith("## Targets")), None)
    if t is None:
        return 0, 0
    a = next((i for i in range(t + 1, len(lines)) if lines[i].startswith("|---")), None)
    if a is None:
        return 0, 0
    b = next((i for i in range(a + 1, len(lines)) if not lines[i].startswith("|")), len(lines))
    return a + 1, b


def keep_standalone(existing: str, new: str, suite_ids: frozenset = frozenset()) -> str:
    """`new` (a suite run's RESULTS.md) with the standalone sections of `existing`, and the
    Targets rows of workloads not in `suite_ids` (W9, W10, ...: the suite's own rows are
    the new run's), carried over."""
    old = existing.splitlines()
    kept = []
    for heading in STANDALONE_HEADINGS:
        a = next((i for i, x in enumerate(old) if x.startswith(heading)), None)
        if a is None:
            continue
        b = next((i for i in range(a + 1, len(old)) if old[i].startswith("## ")), len(old))
        kept += old[a:b]
    oa, ob = _target_rows(old)
    kept_rows = [x for x in old[oa:ob] if x.split("|")[1].strip() not in suite_ids]
    if not kept and not kept_rows:
        return new
    lines = new.splitlines()
    lines = [x for x in lines if not any(x.startswith(h) for h in STANDALONE_HEADINGS)]
    at = next((i for i, x in enumerate(lines) if x.startswith("## Targets")), len(lines))
    lines[at:at] = kept
    _, nb = _target_rows(lines)
    if nb > 0:
        lines[nb:nb] = kept_rows
    return "\n".join(lines) + "\n"



def _machine(doc: dict) -> str:
    m = doc.get("machine", {})
    return f"{m.get('cpu_model', '?')}, {m.get('cpus_usable')} usable CPUs, {m.get('ram_gib', '?')} GiB RAM"


def merge_w7(existing: str, doc: dict, md: str) -> str:
    """RESULTS.md from a run of W7 alone (see merge_section)."""
    return merge_section(existing, doc, md, "W7")


def merge_section(existing: str, doc: dict, md: str, wid: str = "W7") -> str:
    """RESULTS.md from a run of W7 or W13 alone: the existing file with that workload's section
    (and its target lines) replaced or inserted before "## Targets", the other sections kept as
    they are."""
    heading = {"W7": W7_HEADING, "W13": W13_HEADING}[wid]
    lines = md.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith(heading))
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    sec = lines[start:end]
    while sec and not sec[-1].strip():
        sec.pop()
    sec += ["", f"{wid} run: {doc['date']}, `{doc['command']}` ({doc['elapsed_s'] / 60:.1f} min), "
            f"threads {doc['args'].get('threads')}; store{'s' if len(doc['stores']) > 1 else ''}: "
            + "; ".join(s['spec'] for s in doc['stores'].values()) + f"; machine: {_machine(doc)}.", ""]
    old = existing.splitlines()
    if any(x.startswith(heading) for x in old):
        a = next(i for i, x in enumerate(old) if x.startswith(heading))
        b = next((i for i in range(a + 1, len(old)) if old[i].startswith("## ")), len(old))
        old[a:b] = sec
    else:
        at = next((i for i, x in enumerate(old) if x.startswith("## Targets")), len(old))
        old[at:at] = sec
    # Its target lines: drop the old ones, append the new ones to the targets table.
    old = [x for x in old if not x.startswith(f"| {wid} |")]
    if any(x.startswith("## Targets") for x in old):
        t = next(i for i, x in enumerate(old) if x.startswith("## Targets"))
        last = t
        for i in range(t + 1, len(old)):
            if old[i].startswith("|"):
                last = i
            elif last > t:
                break
        new = [f"| {v['workload']} | {v['cache']} | {v['threads']} | {v['reader']} | {v['target']} | "
               f"{'met' if v['met'] else 'missed'} ({v['detail']}) |" for v in doc.get("targets", []) if v["workload"] == wid]
        old[last + 1:last + 1] = new
    return "\n".join(old) + "\n"
