"""CPython's reconstruction of a PyTorch snapshot's allocator state at trace events, with
pickle.load only (no torch), for test/viewer/state-history*.test.ts.

Usage: python3 state_history_truth.py FILE TRACE_INDEX N [N ...]

The snapshot holds the final state; the state after event N is the final state with the events
after N undone, newest first (as torch/utils/viz/MemoryViz.js rebuilds it): undoing `alloc`
removes the block, `free_requested` makes it allocated again, `free_completed` brings it back
pending its free (with the entry's size), `segment_alloc` removes the segment, `segment_free`
brings it back, `segment_map` cuts its range out of the mapped range holding it, and
`segment_unmap` maps it again, joined with adjacent expandable ranges of its stream.

Prints JSON: {"N": {"segments": [[address, size], ...], "blocks": [[address, size, pending], ...]}}
with both lists by address; N = -1 is the state before the first event.
"""
import json
import pickle
import sys

ACTIVE = ("active_allocated", "active_pending_free")


def final_state(snap, device):
    segments = []  # [address, size, stream, expandable]
    blocks = {}  # address -> [size, pending]
    for s in snap.get("segments", []):
        if s.get("device", 0) != device:
            continue
        segments.append([s["address"], s["total_size"], s.get("stream", 0), bool(s.get("is_expandable", False))])
        addr = s["address"]
        for b in s["blocks"]:
            a = b.get("address", addr)
            if b["state"] in ACTIVE:
                blocks[a] = [b["size"], 1 if b["state"] == "active_pending_free" else 0]
            addr = a + b["size"]
    return segments, blocks


def undo(e, segments, blocks):
    action = e["action"]
    if action == "oom" or "addr" not in e:
        return
    a, size = e["addr"], e["size"]
    if action == "alloc":
        blocks.pop(a, None)
    elif action == "free_requested":
        if a in blocks:
            blocks[a] = [blocks[a][0], 0]
    elif action == "free_completed":
        blocks[a] = [size, 1]
    elif action == "segment_alloc":
        segments[:] = [s for s in segments if s[0] != a]
    elif action == "segment_free":
        segments.append([a, size, e.get("stream", 0), False])
    elif action == "segment_map":
        for k, s in enumerate(segments):
            if s[0] <= a and a + size <= s[0] + s[1]:
                pieces = []
                if a > s[0]:
                    pieces.append([s[0], a - s[0], s[2], s[3]])
                if a + size < s[0] + s[1]:
                    pieces.append([a + size, s[0] + s[1] - a - size, s[2], s[3]])
                segments[k:k + 1] = pieces
                break
    elif action == "segment_unmap":
        stream = e.get("stream", 0)
        start, end = a, a + size
        keep = []
        for s in segments:
            if s[3] and s[2] == stream and s[0] + s[1] == a:
                start = s[0]
            elif s[3] and s[2] == stream and s[0] == a + size:
                end = s[0] + s[1]
            else:
                keep.append(s)
        keep.append([start, end - start, stream, True])
        segments[:] = keep


def main():
    path, trace_index = sys.argv[1], int(sys.argv[2])
    wanted = sorted({int(x) for x in sys.argv[3:]}, reverse=True)
    with open(path, "rb") as fh:
        snap = pickle.load(fh)
    trace = snap["device_traces"][trace_index]
    segments, blocks = final_state(snap, trace_index)
    out = {}
    i = len(trace) - 1
    for n in wanted:
        while i > n:
            undo(trace[i], segments, blocks)
            i -= 1
        out[str(n)] = {
            "segments": sorted([s[0], s[1]] for s in segments),
            "blocks": sorted([a, b[0], b[1]] for a, b in blocks.items()),
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
