"""CPython's figures for a PyTorch memory snapshot, read with pickle.load only (no torch).

Usage: python3 snapshot_truth.py FILE [SEARCH_TEXT]

Prints JSON: per device (index into device_traces), the peak of active bytes (an allocation
counts from its `alloc` entry to its `free_completed` entry with the size its alloc entry
gives; blocks live before the trace count from the start with their requested size) and of reserved bytes (segment_alloc/map add, segment_free/unmap remove), the blocks
live before the trace began, and how many allocations have a frame whose "file:line:name"
contains SEARCH_TEXT (case-insensitive), or, for SEARCH_TEXT "0x…", whose block holds that
address.
"""
import json
import pickle
import sys

ACTIVE = ("active_allocated", "active_pending_free")


def hit(needle, frames, addr, size):
    """Search semantics: "0x…" is an address inside the block, anything else text in a frame."""
    if needle.startswith("0x"):
        x = int(needle, 16)
        return addr <= x < addr + size
    return any(needle in frame_text(f) for f in frames)


def frame_text(f):
    line = f.get("line", 0)
    if line >= 2**63:
        line = "?"
    return f"{f.get('filename', '')}:{line}:{f.get('name', '')}".lower()


def user_frame(frames):
    """The innermost Python frame outside the torch package, as "file.py:line:name"."""
    for f in frames:
        name = f.get("filename", "")
        if name.endswith(".py") and "/torch/" not in name.replace("\\", "/"):
            return f"{name.replace(chr(92), '/').split('/')[-1]}:{f.get('line')}:{f.get('name')}"
    return None


def requested(b):
    """A block's requested size: `requested_size`, else (PyTorch 2.0) its history's `real_size`, else its size."""
    if "requested_size" in b:
        return b["requested_size"]
    hist = b.get("history") or []
    return hist[0].get("real_size", b["size"]) if hist else b["size"]


def block_frames(b):
    if "frames" in b:
        return b["frames"]
    hist = b.get("history") or []
    return hist[0].get("frames", []) if hist else []


def main():
    path = sys.argv[1]
    needle = sys.argv[2].lower() if len(sys.argv) > 2 else None
    with open(path, "rb") as fh:
        snap = pickle.load(fh)
    if isinstance(snap, list):
        snap = {"segments": snap, "device_traces": []}
    segments = snap.get("segments", [])
    traces = snap.get("device_traces", [])
    out = {"devices": [], "matches": 0, "largest": None}
    largest = None
    matches = 0
    for d, trace in enumerate(traces):
        segs = [s for s in segments if s.get("device", 0) == d]
        final_active = 0
        final_reserved = 0
        live_at_end = {}
        for s in segs:
            final_reserved += s["total_size"]
            addr = s["address"]
            for b in s["blocks"]:
                a = b.get("address", addr)
                if b["state"] in ACTIVE:
                    final_active += requested(b)
                    live_at_end[a] = b
                addr = a + b["size"]
        active_delta = 0
        reserved_delta = 0
        open_addrs = set()
        before = {}
        for e in trace:
            act = e["action"]
            if act == "alloc":
                if largest is None or e["size"] > largest["size"]:
                    largest = {"device": d, "size": e["size"], "addr": e["addr"], "userFrame": user_frame(e.get("frames", []))}
                active_delta += e["size"]
                open_addrs.add(e["addr"])
                if needle and hit(needle, e.get("frames", []), e["addr"], e["size"]):
                    matches += 1
            elif act == "free_completed":
                active_delta -= e["size"]
                if e["addr"] in open_addrs:
                    open_addrs.discard(e["addr"])
                else:
                    # Live before the trace began: the free entry carries the allocation's frames.
                    before[e["addr"]] = e["size"]
                    if needle and hit(needle, e.get("frames", []), e["addr"], e["size"]):
                        matches += 1
            elif act in ("segment_alloc", "segment_map"):
                reserved_delta += e["size"]
            elif act in ("segment_free", "segment_unmap"):
                reserved_delta -= e["size"]
        for a, b in live_at_end.items():
            if a not in open_addrs and a not in before:
                before[a] = requested(b)
                if needle and hit(needle, block_frames(b), a, requested(b)):
                    matches += 1
        # Every allocation counts with the size its alloc entry (or, live before the trace, its
        # block's requested size or its free entry) gives, from alloc to free_completed: a trace
        # records requested sizes.
        active = sum(before.values())
        reserved = max(0, final_reserved - reserved_delta)
        peak_active, peak_reserved = active, reserved
        sizes = {}
        for e in trace:
            act = e["action"]
            if act == "alloc":
                active += e["size"]
                sizes[e["addr"]] = e["size"]
            elif act == "free_completed":
                active -= sizes.pop(e["addr"], e["size"])
            elif act in ("segment_alloc", "segment_map"):
                reserved += e["size"]
            elif act in ("segment_free", "segment_unmap"):
                reserved -= e["size"]
            peak_active = max(peak_active, active)
            peak_reserved = max(peak_reserved, reserved)
        out["devices"].append({
            "device": d,
            "events": len(trace),
            "peakAllocated": peak_active,
            "peakReserved": peak_reserved,
            "liveBeforeTrace": len(before),
            "liveBeforeTraceBytes": sum(before.values()),
        })
    out["matches"] = matches
    out["largest"] = largest
    print(json.dumps(out))


main()
