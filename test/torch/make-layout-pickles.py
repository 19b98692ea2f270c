# Makes the hand-made snapshots of test/torch/snapshot-layouts.test.ts, one per layout that real
# files use and the unit tests pin, into test/fixtures/torch/ (written with CPython's pickler, as
# torch.cuda.memory._dump_snapshot writes them):
#   long_stack.pickle       trace entries whose frames list (401 distinct frames) is longer than
#                           twice the reader's first frame-list byte cache
#   torch20_history.pickle  PyTorch 2.0: blocks with size / requested_size / state / history and no
#                           address or frames; segments without segment_pool_id / is_expandable /
#                           frames; trace entries without time_us; a `snapshot` action
#   oom_entries.pickle      `oom` trace entries as PyTorch writes them: device_free where addr
#                           would be, no addr
#   unknown_lines.pickle    frames whose line is 2^64-1 (CPython's -1 written unsigned) and -1
#   devices_expandable.pickle  two devices (the second's trace empty), an expandable segment with
#                           segment_map / segment_unmap entries, external_annotations
#
# usage: python3 test/torch/make-layout-pickles.py OUTDIR
import os, pickle, sys

out = sys.argv[1]
MB = 1 << 20


def frame(name, line, filename='train.py'):
    return {'filename': filename, 'name': name, 'line': line}


def write(name, value):
    with open(os.path.join(out, name), 'wb') as f:
        f.write(pickle.dumps(value, protocol=4))


def entry(action, addr, size, time_us, frames, **extra):
    e = {'action': action, 'addr': addr, 'size': size, 'stream': 0}
    e.update(extra)
    e['time_us'] = time_us
    e['frames'] = frames
    return e


def segment(address, blocks, **overrides):
    total = sum(b['size'] for b in blocks)
    allocated = sum(b['size'] for b in blocks if b['state'] == 'active_allocated')
    s = {'device': 0, 'address': address, 'total_size': total, 'allocated_size': allocated, 'active_size': allocated,
         'requested_size': sum(b['requested_size'] for b in blocks if b['state'] == 'active_allocated'), 'stream': 0,
         'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': []}
    s.update(overrides)
    s['blocks'] = blocks
    return s


def block(address, size, requested, state, frames):
    return {'address': address, 'size': size, 'requested_size': requested, 'state': state, 'frames': frames}


# long_stack: each entry's frames list is ~2000 bytes of LONG_BINGETs (memo indices past 255),
# more than twice the 256-byte cache the reader starts with; 401 frames, so that those bytes are
# not a whole number of 4-byte words.
deep = [frame(f'f{i}', i + 1) for i in range(401)]
base = 0x7f0000000000
write('long_stack.pickle', {
    'segments': [segment(base, [block(base, 2 * MB, 2 * MB, 'active_allocated', deep)])],
    # copies: a list object pickled again would be a GET of the first
    'device_traces': [[entry('alloc', base, 2 * MB, 1000, list(deep)), entry('alloc', base, 2 * MB, 1001, list(deep))]],
})

# torch20_history: 2 segments; blocks addressed only by their order in the segment.
model = [frame('forward', 12, 'model.py'), frame('main', 40)]
init = [frame('init_weights', 7, 'model.py'), frame('main', 30)]
def hblock(size, state, history):
    b = {'size': size, 'requested_size': size, 'state': state}
    if history is not None:
        b['history'] = history
    return b
s0 = 0x7f1000000000
s1 = 0x7f2000000000
write('torch20_history.pickle', {
    'segments': [
        {'device': 0, 'address': s0, 'total_size': 20 * MB, 'allocated_size': 12 * MB, 'active_size': 12 * MB,
         'requested_size': 12 * MB - 100, 'stream': 0, 'segment_type': 'large', 'blocks': [
             # requested_size in history[0].real_size, smaller than the block (rounding)
             {'size': 8 * MB, 'state': 'active_allocated', 'history': [{'addr': s0, 'real_size': 8 * MB - 100, 'frames': model}]},
             hblock(4 * MB, 'active_allocated', [{'addr': s0 + 8 * MB, 'real_size': 4 * MB, 'frames': init},
                                                 {'addr': s0 + 8 * MB, 'real_size': 2 * MB, 'frames': model}]),
             hblock(8 * MB, 'inactive', None),
         ]},
        {'device': 0, 'address': s1, 'total_size': 2 * MB, 'allocated_size': 0, 'active_size': 0,
         'requested_size': 0, 'stream': 0, 'segment_type': 'large', 'blocks': [hblock(2 * MB, 'inactive', [])]},
    ],
    'device_traces': [[
        {'action': 'alloc', 'addr': s0, 'size': 8 * MB, 'stream': 0, 'frames': model},
        {'action': 'snapshot', 'addr': 0, 'size': 12 * MB, 'stream': 0},
    ]],
})

# oom_entries: a segment, then an alloc that fails: PyTorch's order of keys, device_free where
# addr would be (torch/csrc/cuda/memory_snapshot.cpp).
a0 = 0x7f3000000000
live = [frame('big_alloc', 21), frame('main', 50)]
small = [frame('small_alloc', 22), frame('main', 51)]
failing = [frame('step', 30), frame('main', 60)]
write('oom_entries.pickle', {
    'segments': [segment(a0, [block(a0, 60 * MB, 60 * MB, 'active_allocated', live),
                              block(a0 + 60 * MB, 2 * MB, 2 * MB - 512, 'active_allocated', small),
                              block(a0 + 62 * MB, 2 * MB, 2 * MB, 'inactive', [])])],
    'device_traces': [[
        entry('segment_alloc', a0, 64 * MB, 100, live),
        entry('alloc', a0, 60 * MB, 101, live),
        entry('alloc', a0 + 60 * MB, 2 * MB, 102, small),
        {'action': 'oom', 'device_free': 3 * MB, 'size': 80 * MB, 'stream': 0, 'frames': failing, 'time_us': 103},
        {'action': 'oom', 'device_free': 1 * MB, 'size': 40 * MB, 'stream': 0, 'time_us': 104, 'frames': failing},
    ]],
    'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1, 'expandable_segments': False},
})

# unknown_lines: torch.compile stacks carry frames whose line CPython reports as -1 and PyTorch
# writes as an unsigned 64-bit int.
u0 = 0x7f4000000000
odd = [frame('compiled_fn', 2 ** 64 - 1, '<eval_with_key>.3'), frame('negative', -1, 'gen.py'), frame('main', 9)]
write('unknown_lines.pickle', {
    'segments': [segment(u0, [block(u0, 2 * MB, 2 * MB, 'active_allocated', odd)])],
    'device_traces': [[entry('alloc', u0, 2 * MB, 5, odd)]],
})

# devices_expandable: device 0 has an expandable segment grown by two maps and shrunk by one
# unmap; device 1 has a segment but no trace entries.
e0 = 0x7f5000000000
d1 = 0x7f6000000000
grow = [frame('grow', 3), frame('main', 4)]
write('devices_expandable.pickle', {
    'segments': [
        segment(e0, [block(e0, 20 * MB, 20 * MB, 'active_allocated', grow), block(e0 + 20 * MB, 20 * MB, 20 * MB, 'inactive', [])],
                is_expandable=True),
        segment(d1, [block(d1, 2 * MB, 2 * MB, 'active_allocated', [])], device=1),
    ],
    'device_traces': [[
        entry('segment_map', e0, 20 * MB, 1, grow),
        entry('alloc', e0, 20 * MB, 2, grow),
        entry('segment_map', e0 + 20 * MB, 40 * MB, 3, grow),
        entry('segment_unmap', e0 + 40 * MB, 20 * MB, 4, []),
    ], []],
    'external_annotations': [{'stage': 'START', 'name': 'step', 'device': 0, 'time_us': 1},
                             {'stage': 'END', 'name': 'step', 'device': 0, 'time_us': 5}],
    'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True', 'expandable_segments': True},
})
