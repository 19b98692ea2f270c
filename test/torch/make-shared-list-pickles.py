# Makes the snapshots for test/torch/snapshot-lanes.test.ts, 'frames lists held by more than one
# dict': a frames list is one Python object, so every block and trace entry that refers to it (a
# memo GET) sees the same list, also when the list is longer than one APPENDS batch or is extended
# after they took it.
#
# usage: python3 make-shared-list-pickles.py MODE  -> the pickle on stdout
#   long          (CPython) stacks of 1,500 and 2,500 frames (two and three APPENDS batches),
#                 the first held by a block, both by trace entries after it
#   empty-shared  (CPython) as PyTorch writes it: every block and segment without a stack (here
#                 also every trace entry) refers to one empty `frames` list
#   after-entry   (by hand) a list filled by two APPENDs, taken by a trace entry read
#                 generically, then extended by a GET and an APPEND
#   after-lane    (by hand) an empty list outside the trace, taken by a trace entry the lane
#                 reads, then extended
#   after-get     (by hand) a list released by the reader once interned, taken by two entries,
#                 then fetched by a GET and extended
#   reput         (by hand) a list whose memo slot is re-PUT with an equal list between its two
#                 APPENDS batches; a later entry GETs the slot, which holds the second list
# The hand-made files are checked here with pickle.loads, so they mean what they say.
import pickle, struct, sys

mode = sys.argv[1]


def frame(i):
    return {'filename': 'x.py', 'line': i, 'name': f'f{i}'}


def entry(i, frames):
    return {'action': 'alloc', 'addr': 512 * i, 'size': 512, 'stream': 0, 'time_us': i, 'frames': frames}


if mode == 'long':
    longer, longest = [frame(i) for i in range(1500)], [frame(i) for i in range(2000, 4500)]
    block = {'address': 0, 'size': 512, 'requested_size': 512, 'state': 'active_allocated', 'frames': longer}
    snapshot = {'segments': [{'device': 0, 'address': 0, 'total_size': 1024, 'blocks': [block]}],
                'device_traces': [[entry(i, lst) for i, lst in enumerate([longer, longest, longer, longest, longest])]]}
    sys.stdout.buffer.write(pickle.dumps(snapshot, protocol=4))
    sys.exit()

if mode == 'empty-shared':
    empty = []
    blocks = [{'address': 512 * i, 'size': 512, 'requested_size': 500, 'state': 'active_allocated', 'frames': empty} for i in range(6)]
    segments = [{'device': 0, 'address': 4096 * s, 'total_size': 4096, 'stream': 0, 'segment_type': 'large',
                 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': empty, 'blocks': blocks[3 * s:3 * s + 3]} for s in range(2)]
    snapshot = {'segments': segments, 'device_traces': [[entry(i, empty) for i in range(4)]]}
    sys.stdout.buffer.write(pickle.dumps(snapshot, protocol=4))
    sys.exit()


class Writer:
    """Opcodes by hand, with every string and dict memoized as CPython does."""

    def __init__(self):
        self.out = bytearray(b'\x80\x04')
        self.memo = 0
        self.strings = {}

    def op(self, *codes):
        self.out += bytes(codes)

    def memoize(self):
        self.op(0x94)
        self.memo += 1
        return self.memo - 1

    def get(self, i):
        self.out += b'h' + bytes([i]) if i < 256 else b'j' + struct.pack('<I', i)

    def str(self, s):
        if s in self.strings:
            return self.get(self.strings[s])
        data = s.encode()
        self.out += b'\x8c' + bytes([len(data)]) + data
        self.strings[s] = self.memoize()

    def int(self, v):
        self.out += b'K' + bytes([v]) if v < 256 else b'J' + struct.pack('<i', v)

    def frame(self, i):
        """A new frame dict; returns its memo index."""
        self.op(0x7d)
        slot = self.memoize()
        self.op(0x28)
        for k, v in frame(i).items():
            self.str(k)
            self.str(v) if isinstance(v, str) else self.int(v)
        self.op(0x75)
        return slot

    def entry(self, i, frames):
        """A trace entry; `frames` writes its frames value."""
        self.op(0x7d)
        self.memoize()
        self.op(0x28)
        for k, v in entry(i, None).items():
            self.str(k)
            if k == 'frames':
                frames()
            else:
                self.str(v) if isinstance(v, str) else self.int(v)
        self.op(0x75)

    def new_list(self, gets, batches=True):
        """A new frames list of memoized frames; returns its memo index."""
        self.op(0x5d)
        slot = self.memoize()
        if batches:
            self.op(0x28)
            for g in gets:
                self.get(g)
            self.op(0x65)
        else:
            for g in gets:
                self.get(g)
                self.op(0x61)
        return slot


w = Writer()
w.op(0x7d)
w.memoize()
w.op(0x28)
w.str('pool')
w.op(0x5d)
w.memoize()
w.op(0x28)
f = [w.frame(i) for i in range(3)]
w.op(0x65)
held = None  # memo index of the list the entries share
if mode == 'after-lane':
    w.str('pre')
    w.op(0x5d)
    held = w.memoize()
w.str('segments')
w.op(0x5d)
w.memoize()
w.str('device_traces')
w.op(0x5d)
w.memoize()
w.op(0x28, 0x5d)
w.memoize()
w.op(0x28)
if mode == 'after-entry':
    def first():
        global held
        held = w.new_list(f[:2], batches=False)
    w.entry(0, first)
    w.entry(1, lambda: w.new_list(f[1:]))
elif mode == 'after-lane':
    w.entry(0, lambda: w.new_list(f[:2]))
    w.entry(1, lambda: w.get(held))
elif mode == 'after-get':
    def first():
        global held
        held = w.new_list(f[:2])
    w.entry(0, first)
    w.entry(1, lambda: w.get(held))
elif mode == 'reput':
    def first():
        global held
        held = w.new_list(f[:2])
        # An equal list put in the same slot, and dropped; then the first list goes on.
        w.op(0x5d)
        w.out += b'q' + bytes([held])
        w.op(0x28)
        w.get(f[0])
        w.get(f[1])
        w.op(0x65, 0x30)
        w.op(0x28)
        w.get(f[2])
        w.op(0x65)
    w.entry(0, first)
    w.entry(1, lambda: w.get(held))
else:
    sys.exit(f'unknown mode {mode}')
w.op(0x65, 0x65)
if mode != 'reput':
    # The list the entries hold, extended after them.
    w.str('post')
    w.get(held)
    w.get(f[2])
    w.op(0x61)
w.op(0x75, 0x2e)

snapshot = pickle.loads(bytes(w.out))
names = [[x['name'] for x in e['frames']] for e in snapshot['device_traces'][0]]
expected = {
    'after-entry': [['f0', 'f1', 'f2'], ['f1', 'f2']],
    'after-lane': [['f0', 'f1'], ['f2']],
    'after-get': [['f0', 'f1', 'f2']] * 2,
    'reput': [['f0', 'f1', 'f2'], ['f0', 'f1']],
}[mode]
assert names == expected, (mode, names)
sys.stdout.buffer.write(bytes(w.out))
