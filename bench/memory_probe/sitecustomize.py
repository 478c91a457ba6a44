"""A memory probe for the operator, loaded by Python at start-up when this folder is on its PYTHONPATH:

    python -m bench.operator_scale ... --operator-env PYTHONPATH=bench/memory_probe

Every 10 s it appends to $MEMPROBE_OUT (default /tmp/tabjob-memprobe.jsonl) the resident set and glibc's heap
(mallinfo2); every 30 s also the live objects by type and the coroutines by name; with MEMPROBE_REFS=1, for a
sample of decoded Kubernetes objects (dicts with a resourceVersion and a uid), the chain of what refers to them --
how the burst's high-water steps were traced to contexts holding whole watch events. Two switches for A/B runs:
MEMPROBE_TRIM=1 calls malloc_trim(0) before each sample; MEMPROBE_NOCHILD=1 drops the operator's kopf watches of
pods, ConfigMaps and Services (a test build only: that operator misses its children's events).
Only a process whose command line names `operator` is probed.
"""

from __future__ import annotations

import collections
import ctypes
import gc
import json
import os
import random
import sys
import threading
import time
import types
from typing import Any


class _MallInfo2(ctypes.Structure):
    _names = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")
    _fields_ = [(n, ctypes.c_size_t) for n in _names]


def _rss_mib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return -1


def _describe(obj: Any) -> str:
    name = type(obj).__name__
    if isinstance(obj, dict):
        return name + "{" + ",".join(sorted(map(str, obj))[:5]) + "}"
    if isinstance(obj, list | tuple):
        return name + f"[{len(obj)}:" + ",".join(type(x).__name__ for x in obj[:3]) + "]"
    code = getattr(obj, "cr_code", None)
    return f"{name}:{code.co_qualname}" if code is not None else name


def _holders(objs: list[Any], samples: int = 25, depth: int = 6) -> dict[str, Any]:
    """For a sample of decoded Kubernetes objects, the first referrer at each level (the probe's own lists left out)."""
    metas = [o for o in objs if type(o) is dict and "resourceVersion" in o and "uid" in o]
    sample = random.sample(metas, min(samples, len(metas)))
    skip = {id(objs), id(metas), id(sample)}
    chains: collections.Counter[str] = collections.Counter()
    for meta in sample:
        chain, current = [], meta
        for _ in range(depth):
            found = gc.get_referrers(current)
            refs = [r for r in found if id(r) not in skip and not isinstance(r, types.FrameType)]
            skip.update((id(found), id(refs)))
            if not refs:
                chain.append("none")
                break
            chain.append(_describe(refs[0]))
            current = refs[0]
        chains[" <- ".join(chain)] += 1
    return {"k8s_metadata_dicts": len(metas), "holders": chains.most_common(8)}


def _loop() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    with open(os.environ.get("MEMPROBE_OUT", "/tmp/tabjob-memprobe.jsonl"), "a") as out:
        for n in range(1, sys.maxsize):
            time.sleep(10)
            if os.environ.get("MEMPROBE_TRIM"):
                libc.malloc_trim(0)
            heap = libc.mallinfo2()
            record: dict[str, Any] = {
                "t": round(time.time(), 1),
                "rss_mib": _rss_mib(),
                "heap_mib": heap.arena >> 20,
                "heap_in_use_mib": heap.uordblks >> 20,
                "heap_free_mib": heap.fordblks >> 20,
            }
            if n % 3 == 0:
                objs = gc.get_objects()
                record["objects"] = len(objs)
                record["by_type"] = collections.Counter(type(o).__name__ for o in objs).most_common(10)
                record["coroutines"] = collections.Counter(
                    o.cr_code.co_qualname for o in objs if isinstance(o, types.CoroutineType)
                ).most_common(12)
                if os.environ.get("MEMPROBE_REFS"):
                    record.update(_holders(objs))
                del objs
            out.write(json.dumps(record) + "\n")
            out.flush()


def _drop_child_watches() -> None:
    import kopf

    register = kopf.on.event

    def event(*args: Any, **kwargs: Any) -> Any:
        if len(args) >= 3 and args[1] == "v1":  # pods, configmaps, services
            return lambda fn: fn
        return register(*args, **kwargs)

    kopf.on.event = event


if sys.argv[1:2] == ["operator"]:  # `tabjob operator ...`
    if os.environ.get("MEMPROBE_NOCHILD"):
        _drop_child_watches()
    threading.Thread(target=_loop, name="memprobe", daemon=True).start()
