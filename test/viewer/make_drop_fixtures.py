#!/usr/bin/env python3
"""Small inputs for the viewer's drop tests (test/viewer/drop-*.test.ts), written with CPython.

- torch/torch20_history_protocol5.pickle.gz: torch/torch20_history.pickle loaded and saved again
  with pickle protocol 5, then gzipped (mtime 0, so the bytes do not change between runs): a
  snapshot in the newest protocol, compressed, as users pass them around.
- traces/memory_timeline_small.json: an export_memory_timeline file ([times, sizes], sizes rows
  in PyTorch's category order) of four timestamps.

Run: python3 test/viewer/make_drop_fixtures.py test/fixtures
"""
import gzip
import json
import os
import pickle
import sys

root = sys.argv[1]
with open(os.path.join(root, 'torch', 'torch20_history.pickle'), 'rb') as f:
    snapshot = pickle.load(f)
with open(os.path.join(root, 'torch', 'torch20_history_protocol5.pickle.gz'), 'wb') as f:
    with gzip.GzipFile(fileobj=f, mode='wb', mtime=0, filename='') as gz:
        gz.write(pickle.dumps(snapshot, protocol=5))

times = [1000, 2000, 3000, 4000]
# [0, PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, unknown]
sizes = [
    [0, 4096, 0, 1024, 0, 0, 0, 0, 0],
    [0, 4096, 0, 1024, 512, 8192, 0, 0, 0],
    [0, 4096, 8192, 0, 0, 2048, 4096, 0, 0],
    [0, 4096, 8192, 0, 0, 0, 0, 0, 256],
]
with open(os.path.join(root, 'traces', 'memory_timeline_small.json'), 'w') as f:
    json.dump([times, sizes], f)
