"""One process of the two-process ``load_jax`` test (test_safetensors_jax.py).

Run as ``python jax_shard_worker.py PROCESS_ID PORT CHECKPOINT CASE OUT.json``: joins a
``jax.distributed`` job of two CPU processes on 127.0.0.1 (4 host devices each), loads the
checkpoint with the case's sharding, checks every addressable shard against the tensors read
whole with the safetensors package (one tensor lives on process 1's devices only), and writes its counts (``load_jax``'s ``stats``) and the
shards it checked to OUT.json.
"""

from __future__ import annotations

import json
import os
import sys

pid, port, ckpt, case, out_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=pid,
                           initialization_timeout=120)

from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import lsio.safetensors  # noqa: E402

ref = load_file(ckpt)
devices = np.array(jax.devices())  # process 0's 4 devices, then process 1's
if case == "rows":        # the first axis split over all 8 devices (both processes)
    mesh, spec = Mesh(devices, ("x",)), P("x")
elif case == "columns":   # the last axis split over all 8: strided ranges
    mesh, spec = Mesh(devices, ("x",)), P(None, "x")
elif case == "mesh2d":    # processes along "p", their devices along "d": rows by process
    mesh, spec = Mesh(devices.reshape(2, 4), ("p", "d")), P("p", "d")
elif case == "columns2d":  # columns by process, rows by device
    mesh, spec = Mesh(devices.reshape(2, 4), ("p", "d")), P("d", "p")
else:
    raise SystemExit(f"unknown case {case}")


only_second = Mesh(devices[4:], ("q",))  # process 1's devices: process 0 holds none of it


def sharding(name, shape, dtype):
    if name == "norm":
        return NamedSharding(only_second, P())
    return NamedSharding(mesh, spec if len(shape) == 2 else P())


max_gap = 0 if case.startswith("columns") else None
stats: dict = {}
got = lsio.safetensors.load_jax(ckpt, sharding, stats=stats, max_gap=max_gap)
checked = 0
for name, arr in got.items():
    want = ref[name]
    assert arr.shape == want.shape and arr.dtype == want.dtype, (name, arr.shape, arr.dtype)
    assert arr.sharding == sharding(name, want.shape, want.dtype), name
    assert len(arr.addressable_shards) == (0 if name == "norm" and pid == 0 else 4), name
    for shard in arr.addressable_shards:
        data = np.asarray(shard.data)
        assert data.tobytes() == np.ascontiguousarray(want[shard.index]).tobytes(), (name, shard.index)
        checked += 1
with open(out_path, "w") as f:
    json.dump({"stats": stats, "checked": checked, "process_count": jax.process_count(),
               "devices": jax.device_count()}, f)
jax.distributed.shutdown()
