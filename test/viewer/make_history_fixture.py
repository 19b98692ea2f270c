"""A hand-made PyTorch memory snapshot for the Allocator State History tests
(test/viewer/state-history*.test.ts): what CUDACachingAllocator.cpp records for the program below,
worked out by hand. No torch is needed: the file is a plain pickle with PyTorch's keys.

    python3 test/viewer/make_history_fixture.py   # writes test/fixtures/torch/history_pools.pickle

One device, four kinds of segment:
- C (default pool, stream 0): 20 MiB reserved before the trace began, holding a 6 MiB block live
  all along and a 2 MiB block the trace frees;
- A (default pool, stream 0): reserved in the trace; one of its blocks ends pending its free
  (record_stream), so the final state has an active_pending_free block;
- P (private pool (1, 0), a CUDA graph's, stream S): a small-pool segment;
- E (expandable): two 20 MiB pages mapped, the first 8 MiB unmapped again after a free;
- B: reserved, used and released by empty_cache() within the trace;
and an out-of-memory entry for 64 MiB when the device has 6 MiB free. allocator_settings has a
key memscope does not know (`future_knob`), to be shown as it is.
"""
import os
import pickle

MiB = 1 << 20
KiB = 1 << 10
OUT = os.path.join(os.path.dirname(__file__), '..', 'fixtures', 'torch', 'history_pools.pickle')
S = 94_000_000_000_000  # a side stream's handle, as cudaStream_t values look

ALLOCATOR = [
    {'filename': '??', 'line': 0, 'name': 'c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, CUstream_st*)'},
    {'filename': '/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py', 'line': 1532, 'name': '_call_impl'},
]


def frames(line, name):
    return ALLOCATOR + [{'filename': '/home/user/project/train.py', 'line': line, 'name': name},
                        {'filename': '/home/user/project/main.py', 'line': 7, 'name': '<module>'}]


def ev(action, addr, size, line, name, stream=0):
    return {'action': action, 'addr': addr, 'size': size, 'stream': stream, 'frames': frames(line, name)}


def block(address, size, state, requested, line=0, name=''):
    b = {'address': address, 'size': size, 'requested_size': requested, 'state': state, 'frames': []}
    if state != 'inactive':
        b['frames'] = frames(line, name)
    return b


def segment(address, blocks, stream=0, pool=(0, 0), kind='large', expandable=False):
    return {
        'device': 0, 'address': address, 'total_size': sum(b['size'] for b in blocks),
        'allocated_size': sum(b['size'] for b in blocks if b['state'] == 'active_allocated'),
        'active_size': sum(b['size'] for b in blocks if b['state'] != 'inactive'),
        'requested_size': sum(b['requested_size'] for b in blocks if b['state'] != 'inactive'),
        'stream': stream, 'segment_type': kind, 'segment_pool_id': pool, 'is_expandable': expandable,
        'frames': [], 'blocks': blocks,
    }


C, A, P, E, B = 0x7E0000000000, 0x7F0000000000, 0x7F1000000000, 0x7F2000000000, 0x7F3000000000
trace = [
    ev('segment_alloc', A, 20 * MiB, 10, 'make_weights'),
    ev('alloc', A, 4 * MiB, 10, 'make_weights'),
    ev('alloc', A + 4 * MiB, 2 * MiB, 11, 'make_bias'),
    ev('segment_alloc', P, 2 * MiB, 20, 'capture_graph', S),
    ev('alloc', P, 512 * KiB, 20, 'capture_graph', S),
    ev('free_requested', A, 4 * MiB, 10, 'make_weights'),
    ev('free_completed', A, 4 * MiB, 10, 'make_weights'),
    ev('segment_map', E, 20 * MiB, 30, 'grow'),
    ev('alloc', E, 8 * MiB, 30, 'grow'),
    ev('segment_map', E + 20 * MiB, 20 * MiB, 31, 'grow_more'),
    ev('alloc', E + 8 * MiB, 24 * MiB, 31, 'grow_more'),
    ev('free_requested', E, 8 * MiB, 30, 'grow'),
    ev('free_completed', E, 8 * MiB, 30, 'grow'),
    ev('segment_unmap', E, 8 * MiB, 32, 'empty_cache'),
    {'action': 'oom', 'size': 64 * MiB, 'device_free': 6 * MiB, 'stream': 0, 'frames': frames(40, 'too_big')},
    ev('alloc', A, 1 * MiB, 41, 'after_oom'),
    ev('free_requested', A + 4 * MiB, 2 * MiB, 11, 'make_bias'),
    ev('alloc', P + 512 * KiB, 256 * KiB, 21, 'capture_graph_2', S),
    ev('segment_alloc', B, 20 * MiB, 50, 'scratch'),
    ev('alloc', B, 3 * MiB, 50, 'scratch'),
    ev('free_requested', B, 3 * MiB, 50, 'scratch'),
    ev('free_completed', B, 3 * MiB, 50, 'scratch'),
    ev('segment_free', B, 20 * MiB, 51, 'empty_cache'),
    ev('free_requested', C + 6 * MiB, 2 * MiB, 3, 'old_buffer'),
    ev('free_completed', C + 6 * MiB, 2 * MiB, 3, 'old_buffer'),
]
for i, e in enumerate(trace):
    e['time_us'] = 1_700_000_000_000_000 + 250 * i

segments = [
    segment(C, [block(C, 6 * MiB, 'active_allocated', 6 * MiB, 2, 'embedding'), block(C + 6 * MiB, 14 * MiB, 'inactive', 0)]),
    segment(A, [block(A, 1 * MiB, 'active_allocated', 1 * MiB, 41, 'after_oom'), block(A + 1 * MiB, 3 * MiB, 'inactive', 0),
                block(A + 4 * MiB, 2 * MiB, 'active_pending_free', 2 * MiB, 11, 'make_bias'), block(A + 6 * MiB, 14 * MiB, 'inactive', 0)]),
    segment(P, [block(P, 512 * KiB, 'active_allocated', 512 * KiB, 20, 'capture_graph'),
                block(P + 512 * KiB, 256 * KiB, 'active_allocated', 256 * KiB, 21, 'capture_graph_2'),
                block(P + 768 * KiB, 1280 * KiB, 'inactive', 0)], stream=S, pool=(1, 0), kind='small'),
    segment(E + 8 * MiB, [block(E + 8 * MiB, 24 * MiB, 'active_allocated', 24 * MiB, 31, 'grow_more'),
                          block(E + 32 * MiB, 8 * MiB, 'inactive', 0)], expandable=True),
]

settings = {
    'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True,max_split_size_mb:128',
    'max_split_size': 128 * MiB,
    'garbage_collection_threshold': 0.0,
    'expandable_segments': True,
    'roundup_power2_divisions': {'1': 0, '2': 0},
    'future_knob': 3,
}

with open(OUT, 'wb') as f:
    pickle.dump({'segments': segments, 'device_traces': [trace], 'allocator_settings': settings, 'external_annotations': []}, f, protocol=4)
