# Makes the snapshot for test/torch/snapshot-lanes.test.ts, 'frame lists recognised by their bytes':
# trace entries whose frame lists repeat in a cycle A, B, C, so that the reader learns to expect C
# after C, A, B; each time it has, the cycle breaks once: C with one frame more (C's bytes are a
# prefix of the list), C with one frame fewer, another list of C's length. After the trace, where C
# is expected again, comes a top-level list of C's frames and one more ('post'), read by the lane
# for lists outside trace entries ('end' follows it: the lane leaves the last bytes of a piece
# alone). Every frame is memoized before the trace ('pre' holds the one
# the cycle does not use), so that every list of two frames or more is MARK GET… APPENDS.
#
# usage: python3 make-predicted-list-pickle.py  -> the pickle on stdout
import pickle, sys
from pickle_edits import strip_frames
def frame(n, l): return {'filename': 'x.py', 'line': l, 'name': n}
f = {n: frame(n, i) for i, n in enumerate(['f1', 'f2', 'f3', 'f4', 'f5', 'f6', 'f7'])}
cycle = [['f1', 'f2'], ['f3', 'f1'], ['f4', 'f5', 'f6']]
breaks = [['f4', 'f5', 'f6', 'f7'], ['f4', 'f5'], ['f7', 'f5', 'f6']]
lists = cycle * 6 + [x for b in breaks for x in cycle[:2] + [b] + cycle * 2] + cycle[:2]
entries = [{'action': 'alloc', 'addr': 512 * i, 'size': 512, 'stream': 0, 'time_us': i,
            'frames': [f[n] for n in names]} for i, names in enumerate(lists)]
snapshot = {'segments': [], 'pre': [f['f7']], 'device_traces': [entries], 'post': [f[n] for n in ['f4', 'f5', 'f6', 'f7']],
            'end': 'bytes after post, so that it is not read near the end of the file'}
sys.stdout.buffer.write(strip_frames(pickle.dumps(snapshot, protocol=4)))
