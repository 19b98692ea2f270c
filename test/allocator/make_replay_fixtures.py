"""Hand-made PyTorch memory snapshots for the replay tests (test/allocator/replay-cases.test.ts).

Each trace is what PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp) records for
the program described beside it, worked out by hand from its rules; the snapshot's segments are the
state it reaches. No torch is needed: the files are plain pickles with PyTorch's keys.

    python3 test/allocator/make_replay_fixtures.py   # writes test/fixtures/torch/replay_*.pickle
"""

import os
import pickle

MiB = 1 << 20
OUT = os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'torch')

DEFAULTS = {
    'PYTORCH_CUDA_ALLOC_CONF': '',
    'max_split_size': -1,
    'garbage_collection_threshold': 0.0,
    'expandable_segments': False,
    'pinned_num_register_threads': 1,
    'release_lock_on_cudamalloc': False,
    'pinned_use_cuda_host_register': False,
    'roundup_power2_divisions': {},
}
EXPANDABLE = dict(DEFAULTS, PYTORCH_CUDA_ALLOC_CONF='expandable_segments:True', expandable_segments=True)


def block(address, size, state, requested):
    return {'address': address, 'size': size, 'requested_size': requested, 'state': state, 'frames': []}


def segment(device, address, blocks, small=False, expandable=False):
    total = sum(b['size'] for b in blocks)
    allocated = sum(b['size'] for b in blocks if b['state'] == 'active_allocated')
    active = sum(b['size'] for b in blocks if b['state'] != 'inactive')
    requested = sum(b['requested_size'] for b in blocks if b['state'] != 'inactive')
    return {
        'device': device, 'address': address, 'total_size': total, 'allocated_size': allocated,
        'active_size': active, 'requested_size': requested, 'stream': 0,
        'segment_type': 'small' if small else 'large', 'segment_pool_id': (0, 0),
        'is_expandable': expandable, 'frames': [], 'blocks': blocks,
    }


def event(action, addr, size, t):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t, 'frames': []}


def oom(size, device_free, t):
    return {'action': 'oom', 'size': size, 'device_free': device_free, 'stream': 0, 'time_us': t, 'frames': []}


def numbered(entries):
    return [e(1000 + i) for i, e in enumerate(entries)]


def write(name, snapshot):
    with open(os.path.join(OUT, name), 'wb') as f:
        pickle.dump(snapshot, f, protocol=4)


# ---- expandable segments (expandable_segments:True), one stream, large pool: 20 MiB pages.
# x = malloc(30 MiB): a fresh segment reserves its address range at B and maps 2 pages (40 MiB);
#     the block splits (expandable segments split any remainder of 512 bytes or more).
# y = malloc(20 MiB): the 10 MiB free tail plus one more mapped page (merged with the tail).
# free(x); torch.cuda.empty_cache(): only page 0 is wholly free: it is unmapped, the 10 MiB after it stays.
# z = malloc(5 MiB): best fit among the two 10 MiB free blocks is the lower one (its next block is
#     mapped, so its "expandable size" is its size).
B = 0x7F0000000000
expandable_trace = numbered([
    lambda t: event('segment_map', B, 40 * MiB, t),
    lambda t: event('alloc', B, 30 * MiB, t),
    lambda t: event('segment_map', B + 40 * MiB, 20 * MiB, t),
    lambda t: event('alloc', B + 30 * MiB, 20 * MiB, t),
    lambda t: event('free_requested', B, 30 * MiB, t),
    lambda t: event('free_completed', B, 30 * MiB, t),
    lambda t: event('segment_unmap', B, 20 * MiB, t),
    lambda t: event('alloc', B + 20 * MiB, 5 * MiB, t),
])
expandable_segments = [segment(0, B + 20 * MiB, [
    block(B + 20 * MiB, 5 * MiB, 'active_allocated', 5 * MiB),
    block(B + 25 * MiB, 5 * MiB, 'inactive', 0),
    block(B + 30 * MiB, 20 * MiB, 'active_allocated', 20 * MiB),
    block(B + 50 * MiB, 10 * MiB, 'inactive', 0),
], expandable=True)]
write('replay_expandable.pickle', {
    'segments': expandable_segments, 'device_traces': [expandable_trace],
    'allocator_settings': EXPANDABLE, 'external_annotations': [],
})
# The same run with the history ring holding only its last four events: the start state (three
# mapped pages, x and y live) comes from the end state and the retained events alone.
write('replay_expandable_ring.pickle', {
    'segments': expandable_segments, 'device_traces': [expandable_trace[4:]],
    'allocator_settings': EXPANDABLE, 'external_annotations': [],
})

# ---- an unmap across two mapped ranges (expandable_segments:True): one event ends both.
# a = malloc(15 MiB): a fresh segment at C maps one page (20 MiB); a at C, 5 MiB free after it.
# b = malloc(30 MiB): the 5 MiB tail is short by 25 MiB: two more pages are mapped in one call
#     (40 MiB at C + 20 MiB), merged with the tail; b at C + 15 MiB, 15 MiB free after it.
# c = malloc(10 MiB): the 15 MiB free block; 5 MiB left free at the end.
# free(a); free(b): one free block C .. C + 45 MiB. torch.cuda.empty_cache(): its whole pages,
#     C .. C + 40 MiB, are unmapped in one segment_unmap: all of the first mapping and the first
#     page of the second; c's page stays mapped.
C = 0x7F4000000000
cut_trace = numbered([
    lambda t: event('segment_map', C, 20 * MiB, t),
    lambda t: event('alloc', C, 15 * MiB, t),
    lambda t: event('segment_map', C + 20 * MiB, 40 * MiB, t),
    lambda t: event('alloc', C + 15 * MiB, 30 * MiB, t),
    lambda t: event('alloc', C + 45 * MiB, 10 * MiB, t),
    lambda t: event('free_requested', C, 15 * MiB, t),
    lambda t: event('free_completed', C, 15 * MiB, t),
    lambda t: event('free_requested', C + 15 * MiB, 30 * MiB, t),
    lambda t: event('free_completed', C + 15 * MiB, 30 * MiB, t),
    lambda t: event('segment_unmap', C, 40 * MiB, t),
])
write('replay_expandable_cut.pickle', {
    'segments': [segment(0, C + 40 * MiB, [
        block(C + 40 * MiB, 5 * MiB, 'inactive', 0),
        block(C + 45 * MiB, 10 * MiB, 'active_allocated', 10 * MiB),
        block(C + 55 * MiB, 5 * MiB, 'inactive', 0),
    ], expandable=True)],
    'device_traces': [cut_trace],
    'allocator_settings': EXPANDABLE, 'external_annotations': [],
})

# ---- three devices: 0 runs out of memory, 1 has memory but no trace, 2 has a small-pool trace.
# Device 0: a = malloc(100 MiB); b = malloc(50 MiB); free(b); malloc(200 MiB): cudaMalloc fails,
# max_split_size is unset so no single block is released first; release_cached_blocks frees b's
# segment; cudaMalloc fails again: the OOM entry (rounded size, cudaMemGetInfo's free bytes).
A0, A1 = 0x7F1000000000, 0x7F2000000000
device0 = numbered([
    lambda t: event('segment_alloc', A0, 100 * MiB, t),
    lambda t: event('alloc', A0, 100 * MiB, t),
    lambda t: event('segment_alloc', A1, 50 * MiB, t),
    lambda t: event('alloc', A1, 50 * MiB, t),
    lambda t: event('free_requested', A1, 50 * MiB, t),
    lambda t: event('free_completed', A1, 50 * MiB, t),
    lambda t: event('segment_free', A1, 50 * MiB, t),
    lambda t: oom(200 * MiB, 150 * MiB, t),
])
# Device 2: two 1000-byte tensors share a fresh 2 MiB small segment; the first is freed.
C0 = 0x7F3000000000
device2 = numbered([
    lambda t: event('segment_alloc', C0, 2 * MiB, t),
    lambda t: event('alloc', C0, 1000, t),
    lambda t: event('alloc', C0 + 1024, 1000, t),
    lambda t: event('free_requested', C0, 1000, t),
    lambda t: event('free_completed', C0, 1000, t),
])
D0 = 0x7F4000000000
write('replay_devices_oom.pickle', {
    'segments': [
        segment(0, A0, [block(A0, 100 * MiB, 'active_allocated', 100 * MiB)]),
        segment(1, D0, [block(D0, 512, 'active_allocated', 8), block(D0 + 512, 2 * MiB - 512, 'inactive', 0)], small=True),
        segment(2, C0, [
            block(C0, 1024, 'inactive', 1000),
            block(C0 + 1024, 1024, 'active_allocated', 1000),
            block(C0 + 2048, 2 * MiB - 2048, 'inactive', 0),
        ], small=True),
    ],
    'device_traces': [device0, [], device2],
    'allocator_settings': DEFAULTS, 'external_annotations': [],
})

# ---- a live block bigger than its request says, for reasons older than the trace.
# Before the trace: in a 20 MiB segment at E0, a 4 MiB request was served by a 4.5 MiB free block
# (a neighbour, since freed, bounded it): 0.5 MiB would remain, not more than 1 MiB, so no split.
# The trace: malloc(8 MiB) lands right after that block, at E0 + 4.5 MiB; then the block is freed.
# Its requested size and the room after it alone would give a 4 MiB block.
E0 = 0x7F5000000000
write('replay_implied_size.pickle', {
    'segments': [segment(0, E0, [
        block(E0, 4608 * 1024, 'inactive', 4 * MiB),
        block(E0 + 4608 * 1024, 8 * MiB, 'active_allocated', 8 * MiB),
        block(E0 + 12800 * 1024, 20 * MiB - 12800 * 1024, 'inactive', 0),
    ])],
    'device_traces': [numbered([
        lambda t: event('alloc', E0 + 4608 * 1024, 8 * MiB, t),
        lambda t: event('free_requested', E0, 4 * MiB, t),
        lambda t: event('free_completed', E0, 4 * MiB, t),
    ])],
    'allocator_settings': DEFAULTS, 'external_annotations': [],
})

# ---- a trace with a hole: the second tensor's alloc is missing (history was paused around it),
# yet it lives in a segment the trace itself allocated. Nothing before that segment_alloc's
# successor can be replayed; from event 1 on the trace is consistent.
F0 = 0x7F6000000000
write('replay_contradiction.pickle', {
    'segments': [segment(0, F0, [
        block(F0, 1024, 'active_allocated', 1000),
        block(F0 + 1024, 1024, 'active_allocated', 1000),
        block(F0 + 2048, 2 * MiB - 2048, 'inactive', 0),
    ], small=True)],
    'device_traces': [numbered([
        lambda t: event('segment_alloc', F0, 2 * MiB, t),
        lambda t: event('alloc', F0, 1000, t),
    ])],
    'allocator_settings': DEFAULTS, 'external_annotations': [],
})
