"""CPython's answer to the query "alive@peak group:user_frame" over a PyTorch memory snapshot,
read with pickle.load only (no torch), for test/viewer/query.test.ts and test/corpus/query.test.ts.

Usage: python3 query_truth.py FILE

An allocation lives from its `alloc` trace entry to its `free_completed` entry, with the size the
alloc entry gives; blocks live before the trace count from the start (with the free entry's size
and frames when the trace frees them, else their block's). The peak is the first moment the live
sizes sum to their maximum. Prints JSON: per device index, the peak and, per first user frame (the
innermost frame of a .py file outside the torch package, as "file.py:line:function", or "(none)"),
the count and bytes of the allocations live at the peak.
"""
import json
import pickle
import re
import sys

ACTIVE = ("active_allocated", "active_pending_free")
TORCH = re.compile(r"(^|[\\/])torch[\\/]")


def user_frame(frames):
    for f in frames:
        name = f.get("filename", "")
        if name.endswith(".py") and not TORCH.search(name):
            line = f.get("line", 0)
            line = "?" if line >= 2**63 or line < 0 else line
            base = re.split(r"[\\/]", name)[-1]
            return f"{base}:{line}:{f.get('name', '')}"
    return "(none)"


def block_frames(b):
    if "frames" in b:
        return b["frames"]
    hist = b.get("history") or []
    return hist[0].get("frames", []) if hist else []


def main():
    with open(sys.argv[1], "rb") as fh:
        snap = pickle.load(fh)
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    out = {}
    for d, trace in enumerate(snap.get("device_traces", [])):
        if not any(e["action"] in ("alloc", "free_completed", "segment_alloc", "segment_free", "segment_map", "segment_unmap") for e in trace):
            continue
        live_blocks = {}
        for s in snap.get("segments", []):
            if s.get("device", 0) != d:
                continue
            addr = s["address"]
            for b in s["blocks"]:
                a = b.get("address", addr)
                if b["state"] in ACTIVE:
                    live_blocks[a] = b
                addr = a + b["size"]
        # Allocations as [start event (-1 before the trace), end event (None never freed), size, frames].
        allocs = []
        open_at = {}
        freed_before = set()
        for i, e in enumerate(trace):
            if e["action"] == "alloc":
                open_at[e["addr"]] = len(allocs)
                allocs.append([i, None, e["size"], e.get("frames", [])])
            elif e["action"] == "free_completed":
                k = open_at.pop(e["addr"], None)
                if k is None:
                    allocs.append([-1, i, e["size"], e.get("frames", [])])
                    freed_before.add(e["addr"])
                else:
                    allocs[k][1] = i
        for a, b in live_blocks.items():
            if a not in open_at and a not in freed_before:
                # A trace records requested sizes; a block live throughout counts its own.
                allocs.append([-1, None, b.get("requested_size", b["size"]), block_frames(b)])
        delta = [0] * (len(trace) + 1)
        live = 0
        for start, end, size, _ in allocs:
            if start < 0:
                live += size
            else:
                delta[start + 1] += size
            if end is not None:
                delta[end + 1] -= size
        best, at = live, 0
        for k in range(1, len(trace) + 1):
            live += delta[k]
            if live > best:
                best, at = live, k
        groups = {}
        for start, end, size, frames in allocs:
            if start < at and (end is None or end >= at):
                g = groups.setdefault(user_frame(frames), [0, 0])
                g[0] += 1
                g[1] += size
        out[str(d)] = {"peak": best, "groups": groups}
    print(json.dumps(out))


main()
