# Makes the snapshots for test/torch/snapshot-lanes.test.ts, 'frame lists recognised by their bytes'.
# Trace entries alternate between the frame lists [fa, fc] and [fb, fc], where fa and fb are memo
# entries exactly 65536 apart: their LONG_BINGETs differ only in the third byte of the index, so
# the two lists have the same length and the same hash in the reader's frame-list cache, and only
# the byte comparison tells them apart. With `reput`, the memo slot of fc (which both lists share)
# and the slot of the string 'alloc' are re-PUT with other values before entry 20, so the list
# [fb, fc] of entry 20 repeats the bytes of entry 19's but not its frames.
#
# usage: python3 make-frame-list-pickles.py [reput]  -> the pickle on stdout
import pickle, sys, struct
from pickle_edits import ops, strip_frames
def frame(n, l): return {'filename': 'x.py', 'line': l, 'name': n}
def build(pad):
    fa, fb, fc, fd = frame('fa', 1), frame('fb', 2), frame('fc', 3), frame('fd', 4)
    entries = [{'action': 'alloc' if i % 2 == 0 else 'free_requested', 'addr': 512 * i, 'size': 512, 'stream': 0,
                'time_us': i, 'frames': [fa, fc] if i % 3 == 0 else [fb, fc]} for i in range(40)]
    return {'segments': [], 'pre': [str(i) for i in range(300)], 'a': [fa, fd], 'pad': [str(-i) for i in range(pad)],
            'b': [fb, fd], 'device_traces': [entries]}
def list_gets(p, k):
    # memo indices of the k-th frame in the two-frame lists (MARK LONG_BINGET x LONG_BINGET y APPENDS)
    seq = list(ops(p)); found = set()
    for i in range(len(seq) - 4):
        if seq[i][0] == 'MARK' and seq[i+1][0] == 'LONG_BINGET' and seq[i+2][0] == 'LONG_BINGET' and seq[i+3][0] == 'APPENDS':
            found.add(seq[i+1+k][1])
    return sorted(found)
def first_gets(p): return list_gets(p, 0)
# Each string in 'pad' takes one memo entry between fa and fb: one trial gives the pad needed.
pad = 65400
g = first_gets(pickle.dumps(build(pad), protocol=4))
pad += 65536 - (g[1] - g[0])
p = pickle.dumps(build(pad), protocol=4)
g = first_gets(p)
if len(g) != 2 or g[1] - g[0] != 65536:
    sys.exit(f'fa and fb are not 65536 memo entries apart: {g}')
p = strip_frames(p)
if len(sys.argv) > 1 and sys.argv[1] == 'reput':
    # Before entry 20: re-PUT fc's memo slot with another frame, and the slot of the string
    # 'alloc' with 'free_completed' (push, LONG_BINPUT, POP; CPython never does this).
    fc = list_gets(p, 1)
    assert len(fc) == 1
    seq = list(ops(p))
    def slot_of(text):
        for i, (name, arg, pos, memo) in enumerate(seq):
            if name == 'SHORT_BINUNICODE' and arg == text and seq[i + 1][0] == 'MEMOIZE': return seq[i + 1][3]
    def get(i): return bytes([0x68, i]) if i < 256 else b'\x6a' + struct.pack('<I', i)
    def short(t): return bytes([0x8c, len(t)]) + t.encode()
    traces = next(pos for name, arg, pos, memo in seq if name == 'SHORT_BINUNICODE' and arg == 'device_traces')
    # Trace entries' dicts (not fc's, written inside entry 0): their first key is 'action'.
    action = slot_of('action')
    entries = [seq[i][2] for i in range(len(seq) - 3)
               if seq[i][0] == 'EMPTY_DICT' and seq[i][2] > traces and (seq[i + 3][1] in ('action', action))]
    assert len(entries) == 40
    at = entries[20]
    ins = (b'\x7d\x28' + get(slot_of('filename')) + short('y.py') + get(slot_of('line')) + b'\x4b\x09' + get(slot_of('name')) + short('fz')
           + b'\x75\x72' + struct.pack('<I', fc[0]) + b'\x30'
           + short('free_completed') + b'\x72' + struct.pack('<I', slot_of('alloc')) + b'\x30')
    p = p[:at] + ins + p[at:]
sys.stdout.buffer.write(p)
