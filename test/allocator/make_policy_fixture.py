"""A small hand-made PyTorch snapshot for the allocator-policy replay tests (test/allocator/policy-replay.test.ts).

The trace is what PyTorch's CUDACachingAllocator (c10/cuda/CUDACachingAllocator.cpp) records, with
default settings on one stream, for this program:

    a = malloc(8 MiB)    # large pool, below 10 MiB: a fresh 20 MiB segment S0; a takes its start
    b = malloc(6 MiB)    # the 12 MiB free rest of S0 splits (6 MiB would remain, more than 1 MiB)
    c = malloc(30 MiB)   # from 10 MiB a segment is the request rounded to 2 MiB: S1, 30 MiB
    free(a)
    d = malloc(7 MiB)    # best fit is a's 8 MiB block; 1 MiB would remain, not more: no split
    free(c); torch.cuda.empty_cache()   # S1 is wholly free and goes back: segment_free

The end state is S0 = [d: 8 MiB block (7 MiB requested), b: 6 MiB, free 6 MiB].

    python3 test/allocator/make_policy_fixture.py   # writes test/fixtures/torch/policy_small.pickle
"""

import os
import pickle

MiB = 1 << 20
OUT = os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'torch', 'policy_small.pickle')
S0 = 0x7F0000000000
S1 = 0x7F0002000000

SETTINGS = {
    'PYTORCH_CUDA_ALLOC_CONF': '',
    'max_split_size': -1,
    'garbage_collection_threshold': 0.0,
    'expandable_segments': False,
    'pinned_num_register_threads': 1,
    'release_lock_on_cudamalloc': False,
    'pinned_use_cuda_host_register': False,
    'roundup_power2_divisions': {},
}


def block(address, size, state, requested):
    return {'address': address, 'size': size, 'requested_size': requested, 'state': state, 'frames': []}


def event(action, addr, size, t):
    return {'action': action, 'addr': addr, 'size': size, 'stream': 0, 'time_us': t, 'frames': []}


blocks = [
    block(S0, 8 * MiB, 'active_allocated', 7 * MiB),
    block(S0 + 8 * MiB, 6 * MiB, 'active_allocated', 6 * MiB),
    block(S0 + 14 * MiB, 6 * MiB, 'inactive', 0),
]
segment = {
    'device': 0, 'address': S0, 'total_size': 20 * MiB, 'allocated_size': 14 * MiB, 'active_size': 14 * MiB,
    'requested_size': 13 * MiB, 'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0),
    'is_expandable': False, 'frames': [], 'blocks': blocks,
}
steps = [
    ('segment_alloc', S0, 20 * MiB),
    ('alloc', S0, 8 * MiB),
    ('alloc', S0 + 8 * MiB, 6 * MiB),
    ('segment_alloc', S1, 30 * MiB),
    ('alloc', S1, 30 * MiB),
    ('free_requested', S0, 8 * MiB),
    ('free_completed', S0, 8 * MiB),
    ('alloc', S0, 7 * MiB),
    ('free_requested', S1, 30 * MiB),
    ('free_completed', S1, 30 * MiB),
    ('segment_free', S1, 30 * MiB),
]
trace = [event(action, addr, size, 1000 + i) for i, (action, addr, size) in enumerate(steps)]
snapshot = {'segments': [segment], 'device_traces': [trace], 'allocator_settings': SETTINGS, 'external_annotations': []}

with open(OUT, 'wb') as f:
    pickle.dump(snapshot, f, protocol=4)
