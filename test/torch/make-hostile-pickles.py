"""Hand-made hostile snapshots for test/torch/hostile.test.ts: `python3 make-hostile-pickles.py CASE`
writes the pickle for CASE to stdout. Each is small on disk and costly if read naively."""
import pickle
import sys


def block(address, size, state='active_allocated'):
    return {'address': address, 'size': size, 'requested_size': size, 'state': state, 'frames': []}


def segment(address, total, blocks, extra=None):
    seg = {
        'device': 0,
        'address': address,
        'total_size': total,
        'allocated_size': sum(b['size'] for b in blocks if b['state'] == 'active_allocated'),
        'active_size': sum(b['size'] for b in blocks if b['state'].startswith('active')),
        'requested_size': sum(b['requested_size'] for b in blocks if b['state'] == 'active_allocated'),
        'stream': 0,
        'segment_type': 'large',
        'segment_pool_id': (0, 0),
        'is_expandable': False,
        'frames': [],
        'blocks': blocks,
    }
    if extra:
        seg.update(extra)
    return seg


def thousand_block_segment(extra=None):
    blocks = [block(0x7F0000000000 + 512 * i, 512) for i in range(1000)]
    return segment(0x7F0000000000, 512 * 1000, blocks, extra)


def snapshot(segments, **more):
    snap = {'segments': segments, 'device_traces': [[]], 'allocator_settings': {}}
    snap.update(more)
    return snap


def nested_shared_list(levels):
    value = [None]
    for _ in range(levels):
        value = [value, value]
    return value


def main(case):
    if case == 'shared-segment':
        # one segment dict of 1,000 blocks, referenced a million times through the memo
        value = snapshot([thousand_block_segment()] * 1_000_000)
    elif case == 'shared-generic-segment':
        # the same, with a key the segment recogniser does not know (read as a generic dict)
        value = snapshot([thousand_block_segment({'zz_unknown': 1})] * 1_000_000)
    elif case == 'shared-settings':
        # a list shared 2^40 times (each level holds the one below twice) inside allocator_settings
        value = snapshot([], allocator_settings={'nested': nested_shared_list(40)})
    elif case == 'shared-unknown-key':
        value = snapshot([], zz_unknown_key=nested_shared_list(40))
    elif case == 'huge-total-size':
        value = snapshot([segment(0x7F0000000000, 2**50, [block(0x7F0000000000, 2**50)])])
    elif case == 'negative-total-size':
        value = snapshot([segment(0x7F0000000000, -(2**40) + 2**30 // 50, [block(0x7F0000000000, 512)])])
    elif case == 'small-segments':
        # three segments of a few blocks: the segment lane's input, for byte-level edits
        value = snapshot([segment(0x7F0000000000 + (i << 30), 4096, [block(0x7F0000000000 + (i << 30) + 1024 * j, 1024) for j in range(4)]) for i in range(3)])
    elif case == 'long-stack':
        # four trace entries sharing one 200-frame stack as separate lists: the later lists are
        # 200 memo GETs each, which the frames-list byte cache keeps (and, past its size, grows)
        frames = [{'filename': 'x.py', 'line': i, 'name': f'f{i}'} for i in range(200)]
        entries = [{'action': 'alloc', 'addr': 4096 * k, 'size': 512, 'stream': 0, 'time_us': k, 'frames': list(frames)} for k in range(4)]
        value = {'segments': [], 'device_traces': [entries], 'allocator_settings': {}}
    elif case == 'shared-stack':
        # one 1,000-frame stack (frames list) shared by 30,000 trace entries and 1,000 blocks, as
        # PyTorch shares a stack between the entries and blocks one call site makes
        frames = [{'filename': 'model.py', 'line': i, 'name': f'f{i}'} for i in range(1000)]
        blocks = [dict(block(0x7F0000000000 + 512 * i, 512), frames=frames) for i in range(1000)]
        entries = [{'action': 'alloc', 'addr': 0x7F0000000000 + 512 * (k % 1000), 'size': 512, 'stream': 0, 'time_us': k, 'frames': frames} for k in range(30_000)]
        value = snapshot([segment(0x7F0000000000, 512 * 1000, blocks)], device_traces=[entries])
    elif case == 'shared-stack-elsewhere':
        # a 1,000-frame list shared 30,000 times, not as a stack: under an unknown key
        frames = [{'filename': 'model.py', 'line': i, 'name': f'f{i}'} for i in range(1000)]
        value = snapshot([], zz_unknown_key=[frames] * 30_000)
    else:
        raise SystemExit(f'unknown case {case}')
    sys.stdout.buffer.write(pickle.dumps(value, protocol=4))


if __name__ == '__main__':
    main(sys.argv[1])
