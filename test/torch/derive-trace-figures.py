"""Independent figures for test/torch/chrome-trace.test.ts, computed from the
fixtures with Python's json module (no memscope code). Run:
    python3 test/torch/derive-trace-figures.py test/fixtures/traces/*.json.gz
Attribution here is a different algorithm from memscope's stack sweep: for each
[memory] event, among CPU spans on the same pid/tid with ts <= t <= ts+dur, take
the one that starts last (ties: the one that ends first)."""
import bisect, collections, gzip, json, sys

OPS = {'cpu_op', 'Operator', 'user_annotation', 'python_function'}

def device(a):
    t, i = a['Device Type'], a['Device Id']
    name = {0: 'cpu', 1: 'cuda'}[t]
    return name if i < 0 else f'{name}:{i}'

for path in sys.argv[1:]:
    events = json.load(gzip.open(path))['traceEvents']
    mem = [(e['ts'], e['args'].get('Ev Idx', k), k, e) for k, e in enumerate(events) if e.get('name') == '[memory]']
    mem.sort(key=lambda x: (x[0], x[1], x[2]))
    spans = collections.defaultdict(list)
    for e in events:
        if e.get('ph') == 'X' and e.get('cat') in OPS:
            spans[(str(e['pid']), str(e['tid']))].append((e['ts'], e['ts'] + e.get('dur', 0), e['name']))
    starts = {}
    for k in spans:
        spans[k].sort()
        starts[k] = [s[0] for s in spans[k]]
    out = {'file': path.split('/')[-1], 'memoryEvents': len(mem), 'devices': {}}
    per = collections.defaultdict(lambda: {'n': 0, 'alloc': 0, 'free': 0, 'sum': 0, 'peakSum': 0, 'peakTA': None, 'peakTR': None, 'first': None, 'last': None, 'self': collections.Counter()})
    for ts, _, _, e in mem:
        a = e['args']
        d = per[device(a)]
        d['n'] += 1
        b = a['Bytes']
        if b > 0: d['alloc'] += 1
        elif b < 0: d['free'] += 1
        d['sum'] += b
        d['peakSum'] = max(d['peakSum'], d['sum'])
        if 'Total Allocated' in a:
            if d['first'] is None: d['first'] = a['Total Allocated'] - b
            d['last'] = a['Total Allocated']
            d['peakTA'] = max(d['peakTA'] or 0, a['Total Allocated'])
            d['peakTR'] = max(d['peakTR'] or 0, a['Total Reserved'])
        key = (str(e['pid']), str(e['tid']))
        best = None
        if key in spans:
            lst = spans[key]
            j = bisect.bisect_right(starts[key], ts) - 1
            while j >= 0:
                s, en, name = lst[j]
                if en >= ts and (best is None or s > best[0] or (s == best[0] and en < best[1])):
                    best = (s, en, name)
                if best is not None and s < best[0]:
                    break
                j -= 1
        d['self'][best[2] if best else '<no operator>'] += b
    for name, d in sorted(per.items()):
        top = sorted(d['self'].items(), key=lambda kv: -kv[1])[:5]
        out['devices'][name] = {
            'events': d['n'], 'allocations': d['alloc'], 'frees': d['free'],
            'peakRunningSum': d['peakSum'], 'finalRunningSum': d['sum'],
            'peakTotalAllocated': d['peakTA'], 'peakTotalReserved': d['peakTR'],
            'allocatedBeforeFirstEvent': d['first'], 'lastTotalAllocated': d['last'],
            'topSelfNetByOperator': top,
        }
    print(json.dumps(out, indent=1))
