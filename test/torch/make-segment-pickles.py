# Makes the snapshot for test/torch/snapshot-lanes.test.ts, 'the segment lane': segments in every
# shape the lane reads (both key orders, None values, a new segment_type string, no / one / 1500
# blocks, empty and long frame lists, 7-byte addresses) and in shapes it must leave to the general
# path after it has already read some of a segment's blocks:
#   - segment 0 defines the frames (new frame dicts, which the lanes never decode);
#   - (segments 1, 3-6, 9-11 GET the pool tuple (0, 0) that segment 0 made, and segment 8 GETs
#     segment 7's, which the lane has released; the top-level key 'pool' GETs it once more;)
#   - segment 9 has a key after its blocks that no segment has;
#   - segment 10's second block is a legacy block with `history`;
#   - CPython starts a new FRAME (every 64 KiB) inside segment 5's 1500 blocks, and the block lane
#     gives up at a FRAME opcode (checked below, so that a Python that frames otherwise says so).
# With `reput`, the memo slot of the string 'large' is re-PUT with 'huge' before segment 5, so
# segments that GET that slot from then on have the type 'huge' (CPython never re-PUTs a slot).
#
# usage: python3 make-segment-pickles.py [reput]  -> the pickle on stdout
import pickle, pickletools, sys, struct
from pickle_edits import ops, strip_frames

frames = [{'name': f'f{i}', 'filename': f'm{i % 7}.py', 'line': i} for i in range(300)]
GiB = 2 ** 30

def block(address, size, state, stack, requested=True):
    d = {'address': address, 'size': size}
    if requested: d['requested_size'] = size - 1
    d['state'] = state
    d['frames'] = [frames[i] for i in stack]
    return d

def segment(i, block_list, frames_first=True, **kw):
    d = {'device': 0, 'address': 2 ** 47 + 2 ** 31 + i * 2 ** 33, 'total_size': sum(b['size'] for b in block_list) or 512,
         'allocated_size': 0, 'active_size': 0, 'requested_size': 0, 'stream': 0, 'segment_type': 'large',
         'segment_pool_id': (0, 0), 'is_expandable': False}
    stack = [frames[(i * 7 + k) % 300] for k in range(i % 5)]
    if frames_first: d['frames'] = stack
    d['blocks'] = block_list
    if not frames_first: d['frames'] = stack
    for k, v in kw.items():
        if v is DROP: d.pop(k)
        else: d[k] = v
    return d

DROP = object()
base = 2 ** 47
shared_pool = (3, 4)
segments = [
    segment(0, [block(base, 512, 'active_allocated', [0, 1, 2])], frames=frames),
    segment(1, [block(base + k * 512, 512, 'active_allocated', [k, k + 1, 260 + k]) for k in range(3)]),
    segment(2, [block(base, 1 << 20, 'inactive', [5])], frames_first=False, segment_type='small', segment_pool_id=None, is_expandable=True),
    segment(3, [], device=None, requested_size=None, stream=None, frames=None, blocks=None),
    segment(4, [], frames=[]),
    segment(5, [block(base + k * 1024, 1024, ['active_allocated', 'inactive', 'active_pending_free'][k % 3], [k % 300, (k * 31) % 300], requested=k % 2 == 0)
                for k in range(1500)], stream=140000000000),
    segment(6, [block(base, 3 * GiB, 'weird_state', list(range(250, 290)))], device=-1, allocated_size=DROP),
    segment(7, [block(base, 512, 'active_allocated', [7])], segment_pool_id=shared_pool),
    segment(8, [block(base, 512, 'active_allocated', [8])], segment_pool_id=shared_pool),
    dict(segment(9, [block(base, 512, 'active_allocated', [9]), block(base + 512, 512, 'inactive', [10])]), extra_key=1),
    segment(10, [block(base, 512, 'active_allocated', [11]),
                 {'address': base + 512, 'size': 512, 'state': 'inactive', 'history': [{'addr': base + 512, 'real_size': 500}]}]),
    segment(11, [block(base, 512, 'active_allocated', [12])]),
]
trace = [{'action': 'alloc', 'addr': base + 512 * i, 'size': 512, 'stream': 0, 'time_us': i, 'frames': [frames[i]]} for i in range(4)]
p = pickle.dumps({'segments': segments, 'device_traces': [trace], 'pool': shared_pool}, protocol=4)

def segment_starts(p):
    # Segment dicts: EMPTY_DICT MEMOIZE MARK then the key 'device' (a new string in segment 0, then GETs).
    seq = list(pickletools.genops(p))
    memo = [0]
    for op, arg, pos in seq: memo.append(memo[-1] + (op.name == 'MEMOIZE'))
    device = next(memo[i + 1] for i, (op, arg, pos) in enumerate(seq) if op.name == 'SHORT_BINUNICODE' and arg == 'device')
    return [seq[i][2] for i in range(len(seq) - 3)
            if seq[i][0].name == 'EMPTY_DICT' and (seq[i + 3][1] == 'device' or (seq[i + 3][0].name == 'BINGET' and seq[i + 3][1] == device))]

starts = segment_starts(p)
assert len(starts) == len(segments), starts
frames_at = [pos for op, arg, pos in pickletools.genops(p) if op.name == 'FRAME'][1:]
assert len(frames_at) == 1 and starts[5] < frames_at[0] < starts[6], f'FRAME opcodes at {frames_at}, segments at {starts}'

if len(sys.argv) > 1 and sys.argv[1] == 'reput':
    p = strip_frames(p)
    seq = list(ops(p))
    large = next(seq[i + 1][3] for i, (name, arg, pos, memo) in enumerate(seq) if name == 'SHORT_BINUNICODE' and arg == 'large')
    at = segment_starts(p)[5]
    p = p[:at] + bytes([0x8c, 4]) + b'huge' + b'\x72' + struct.pack('<I', large) + b'\x30' + p[at:]
sys.stdout.buffer.write(p)
