import { describe, it, expect } from 'vitest';
import { readFileSync } from 'node:fs';
import { MemscopeError } from '../../src/core/errors.js';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { writePickle } from '../../src/torch/pickle/writer.js';
import { readerOf, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import {
  blockAt,
  normaliseSnapshot,
  readSnapshot,
  stackFrames,
  traceEventAt,
  type MemorySnapshot,
} from '../../src/torch/index.js';
import { python, pythonPickle } from './python.js';
import { resolved } from './resolved-snapshot.js';
import { fixture } from '../support/fixtures.js';

const FIXTURES = [
  'small_3seg',
  'state_only_259seg',
  'older_no_settings_6633blocks',
  'newest_format_trace',
  'transformer_forward_trace',
  'transformer_fullstep_trace',
] as const;

interface PythonFacts {
  segments: number;
  blocks: number;
  states: Record<string, number>;
  allocated: number;
  active: number;
  reserved: number;
  requested: number;
  actions: Record<string, number>[];
  peakAllocated: number;
  peakReserved: number;
  firstTraceFrames: [string, string, number][] | null;
  keys: string[];
}

/** The same figures computed by CPython's pickle.load, independently of memscope. */
function pythonFacts(file: string): PythonFacts {
  const script = `
import pickle, json, collections, sys
d = pickle.load(open(${JSON.stringify(file)}, 'rb'))
segs = d['segments']
blocks = [b for s in segs for b in s['blocks']]
tr = [e for t in d['device_traces'] for e in t]
delta = mx = rdelta = rmx = 0
for e in tr:
    a = e['action']
    if a == 'alloc': delta += e['size']
    elif a == 'free_completed': delta -= e['size']
    elif a == 'segment_alloc': rdelta += e['size']
    elif a == 'segment_free': rdelta -= e['size']
    mx = max(mx, delta); rmx = max(rmx, rdelta)
alloc = sum(s['allocated_size'] for s in segs); res = sum(s['total_size'] for s in segs)
first = next((e for e in tr if e.get('frames')), None)
print(json.dumps(dict(
  segments=len(segs), blocks=len(blocks),
  states=collections.Counter(b['state'] for b in blocks),
  allocated=alloc, active=sum(s['active_size'] for s in segs), reserved=res,
  requested=sum(s['requested_size'] for s in segs),
  actions=[collections.Counter(e['action'] for e in t) for t in d['device_traces']],
  peakAllocated=alloc - delta + mx, peakReserved=res - rdelta + rmx,
  firstTraceFrames=[[f['name'], f['filename'], f['line']] for f in first['frames']] if first else None,
  keys=list(d.keys()))))`;
  return JSON.parse(python(script).toString()) as PythonFacts;
}

function sumBlocks(s: MemorySnapshot, pred: (state: string) => boolean, field: 'size' | 'requestedSize' = 'size'): number {
  let total = 0;
  for (let i = 0; i < s.blocks.count; i++) if (pred(s.stateNames[s.blocks.state[i]!]!)) total += s.blocks[field][i]!;
  return total;
}

/** Peak allocated / reserved over the trace, replayed backwards from the snapshot's final state. */
function tracePeaks(s: MemorySnapshot): { allocated: number; reserved: number } {
  let delta = 0, max = 0, rdelta = 0, rmax = 0;
  for (const t of s.traces) {
    for (let i = 0; i < t.count; i++) {
      const action = s.actionNames[t.action[i]!];
      if (action === 'alloc') delta += t.size[i]!;
      else if (action === 'free_completed') delta -= t.size[i]!;
      else if (action === 'segment_alloc') rdelta += t.size[i]!;
      else if (action === 'segment_free') rdelta -= t.size[i]!;
      max = Math.max(max, delta);
      rmax = Math.max(rmax, rdelta);
    }
  }
  const allocated = s.segments.reduce((a, g) => a + g.allocatedSize, 0);
  const reserved = s.segments.reduce((a, g) => a + g.totalSize, 0);
  return { allocated: allocated - delta + max, reserved: reserved - rdelta + rmax };
}

describe('readSnapshot on every real PyTorch snapshot', () => {
  for (const name of FIXTURES) {
    it(`${name}: agrees with the file's own segment fields and with CPython`, () => {
      const file = fixture(`torch/${name}.pickle`);
      const bytes = readFileSync(file);
      const s = readSnapshot(bytes);
      const py = pythonFacts(file);
      expect(s.segments.length).toBe(py.segments);
      expect(s.blocks.count).toBe(py.blocks);
      // Per segment: blocks add up to the segment's own fields.
      for (const g of s.segments) {
        let total = 0, allocated = 0, active = 0, requested = 0;
        for (let i = g.firstBlock; i < g.firstBlock + g.blockCount; i++) {
          const state = s.stateNames[s.blocks.state[i]!];
          expect(s.blocks.segment[i]).toBe(g.index);
          total += s.blocks.size[i]!;
          if (state === 'active_allocated') (allocated += s.blocks.size[i]!), (requested += s.blocks.requestedSize[i]!);
          if (state === 'active_allocated' || state === 'active_awaiting_free') active += s.blocks.size[i]!;
        }
        expect(total).toBe(g.totalSize);
        expect(allocated).toBe(g.allocatedSize);
        expect(active).toBe(g.activeSize);
        expect(requested).toBe(g.requestedSize);
      }
      expect(sumBlocks(s, (st) => st === 'active_allocated')).toBe(py.allocated);
      expect(sumBlocks(s, (st) => st.startsWith('active'))).toBe(py.active);
      expect(sumBlocks(s, () => true)).toBe(py.reserved);
      expect(sumBlocks(s, (st) => st === 'active_allocated', 'requestedSize')).toBe(py.requested);
      const states: Record<string, number> = {};
      for (let i = 0; i < s.blocks.count; i++) states[s.stateNames[s.blocks.state[i]!]!] = (states[s.stateNames[s.blocks.state[i]!]!] ?? 0) + 1;
      expect(states).toEqual(py.states);
      // Trace: events by action, per device, and the peak.
      expect(
        s.traces.map((t) => {
          const counts: Record<string, number> = {};
          for (let i = 0; i < t.count; i++) counts[s.actionNames[t.action[i]!]!] = (counts[s.actionNames[t.action[i]!]!] ?? 0) + 1;
          return counts;
        }),
      ).toEqual(py.actions);
      expect(tracePeaks(s)).toEqual({ allocated: py.peakAllocated, reserved: py.peakReserved });
      if (py.firstTraceFrames) {
        const t = s.traces.find((x) => x.count > 0)!;
        let i = 0;
        while (t.stack[i] === 0) i++;
        expect(stackFrames(s, t.stack[i]!).map((f) => [f.name, f.filename, f.line])).toEqual(py.firstTraceFrames);
      }
      expect(s.format.hasAllocatorSettings).toBe(py.keys.includes('allocator_settings'));
      expect(s.format.hasExternalAnnotations).toBe(py.keys.includes('external_annotations'));
      // The generic path (readPickle + normaliseSnapshot) builds the same model.
      expect(resolved(normaliseSnapshot(readPickle(bytes)))).toEqual(resolved(s));
      // So does reading the file in small pieces (the machine resumes at opcode boundaries).
      const pieces = readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes: 4096 });
      expect(resolved(pieces)).toEqual(resolved(s));
    });
  }

  it('reads the same in pieces of every size from 64 to 400 bytes (opcodes cut at every place)', () => {
    // The machine stops before an opcode a piece holds only part of and resumes with the next
    // piece; with these sizes the cuts fall inside every kind of opcode in a real snapshot (strings
    // longer than a piece included: the buffer grows for them).
    const bytes = readFileSync(fixture('torch/small_3seg.pickle'));
    const whole = resolved(readSnapshot(bytes));
    for (let size = 64; size <= 400; size++) {
      const s = readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes: size });
      expect(resolved(s), `pieces of ${size} bytes`).toEqual(whole);
    }
  });

  it('pins the figures of the small fixture', () => {
    const s = readSnapshotFile(fixture('torch/small_3seg.pickle'));
    expect(s.segments[0]).toMatchInlineSnapshot(`
      {
        "activeSize": 10733568,
        "address": 125521090314240,
        "allocatedSize": 10733568,
        "blockCount": 6,
        "device": 0,
        "firstBlock": 0,
        "index": 0,
        "isExpandable": false,
        "poolId": [
          0,
          0,
        ],
        "requestedSize": 10733568,
        "segmentType": "large",
        "stack": 0,
        "stream": 0,
        "totalSize": 20971520,
      }
    `);
    expect(blockAt(s, 0)).toMatchInlineSnapshot(`
      {
        "address": 125521090314240,
        "index": 0,
        "requestedSize": 1152000,
        "segment": 0,
        "size": 1152000,
        "stack": 0,
        "state": "active_allocated",
      }
    `);
    expect(s.allocatorSettings?.['max_split_size']).toBe(-1);
    expect(s.format).toMatchInlineSnapshot(`
      {
        "hasAllocatorSettings": true,
        "hasExternalAnnotations": true,
        "legacyBlockHistory": false,
        "traceKeys": [],
        "unknownKeys": [],
      }
    `);
  });

  it('reads the newest layout: compile_context, user_metadata, Windows paths', () => {
    const file = fixture('torch/newest_format_trace.pickle');
    const s = readSnapshot(readFileSync(file));
    const e = traceEventAt(s, s.traces[0]!, 0);
    expect(e).toMatchInlineSnapshot(`
      {
        "action": "alloc",
        "addr": 47294971904,
        "compileContext": "N/A",
        "deviceFree": null,
        "index": 0,
        "size": 25165824,
        "stack": 3,
        "stream": 0,
        "timeUs": 1776479641085368,
        "userMetadata": "",
      }
    `);
    expect(stackFrames(s, e.stack)[0]).toMatchInlineSnapshot(`
      {
        "filename": "D:\\Dev\\assignment2-systems\\cs336-basics\\cs336_basics\\model.py",
        "line": 54,
        "name": "forward",
      }
    `);
  });

  it('reads the full-step trace: C++ frames and external annotations', () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const s = readSnapshot(readFileSync(file));
    expect(s.externalAnnotations.length).toBe(4);
    expect(s.externalAnnotations[0]).toMatchInlineSnapshot(`
      {
        "device": 0,
        "name": "Optimizer.zero_grad#AdamW.zero_grad",
        "stage": "START",
        "timeUs": 1748732571525680,
      }
    `);
    expect(stackFrames(s, s.segments[0]!.stack)[0]).toEqual({ name: 'torch::unwind::unwind()', filename: '??', line: 0 });
    // Stacks are interned: far fewer distinct stacks than events.
    expect(s.stacks.count).toBeLessThan(s.traces[0]!.count / 50);
  });
});

describe('normaliser: PyTorch versions and odd shapes', () => {
  const legacy = `{'segments': [{'device': 0, 'address': 4096, 'total_size': 3072, 'allocated_size': 1024,
     'active_size': 1024, 'stream': 0, 'segment_type': 'small',
     'blocks': [
       {'address': 4096, 'size': 1024, 'state': 'active_allocated',
        'history': [{'addr': 4096, 'real_size': 1000, 'frames': [{'name': 'f', 'filename': 'x.py', 'line': 1}]}]},
       {'address': 5120, 'size': 2048, 'state': 'inactive'}]}],
   'device_traces': [[{'action': 'oom', 'addr': 0, 'size': 1 << 40, 'stream': 0, 'device_free': 12345},
                      {'action': 'future_action', 'addr': 1, 'size': 2, 'stream': 0, 'extra_key': 1}]],
   'mystery': {'a': (1, 2)}}`;

  it('reads PyTorch 2.0-era blocks with history instead of frames, oom events, unknown actions and keys', () => {
    for (const s of [readSnapshot(pythonPickle(legacy, 4)), normaliseSnapshot(readPickle(pythonPickle(legacy, 2)))]) {
      expect(s.format.legacyBlockHistory).toBe(true);
      expect(s.format.hasAllocatorSettings).toBe(false);
      expect(s.format.unknownKeys).toEqual(['mystery']);
      expect(s.format.traceKeys).toEqual(['action', 'addr', 'device_free', 'extra_key', 'size', 'stream']);
      expect(s.extra).toEqual({ mystery: { a: [1, 2] } });
      expect(blockAt(s, 0)).toEqual({ index: 0, segment: 0, address: 4096, size: 1024, requestedSize: 1000, state: 'active_allocated', stack: 1 });
      expect(stackFrames(s, 1)).toEqual([{ name: 'f', filename: 'x.py', line: 1 }]);
      expect(s.segments[0]!.requestedSize).toBeNull();
      expect(s.segments[0]!.poolId).toBeNull();
      const [oom, future] = [traceEventAt(s, s.traces[0]!, 0), traceEventAt(s, s.traces[0]!, 1)];
      expect(oom.action).toBe('oom');
      expect(oom.deviceFree).toBe(12345);
      expect(oom.timeUs).toBeNull();
      expect(future.action).toBe('future_action');
      expect(future.deviceFree).toBeNull();
    }
  });

  it('reads PyTorch 1.x snapshots that are a bare list of segments', () => {
    const s = readSnapshot(pythonPickle(`[{'address': 0, 'total_size': 512, 'blocks': [{'address': 0, 'size': 512, 'state': 'active_allocated'}]}]`, 2));
    expect(s.segments[0]).toMatchObject({ allocatedSize: 512, activeSize: 512, device: -1, segmentType: 'large' });
    expect(s.traces).toEqual([]);
  });

  it('names the path of a bad field', () => {
    const bad = (expr: string): string => {
      try {
        readSnapshot(pythonPickle(expr, 4));
      } catch (e) {
        expect(e).toBeInstanceOf(MemscopeError);
        return (e as Error).message;
      }
      throw new Error('expected an error');
    };
    expect(bad(`{'segments': [{'address': 0, 'total_size': 1, 'blocks': [{'address': 0, 'size': '1', 'state': 'inactive'}]}]}`)).toBe(
      'snapshot: segments[0].blocks[0].size: expected an int, found a str',
    );
    expect(bad(`{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 2**60, 'size': 1}]]}`)).toBe(
      "snapshot: device_traces[0][0].addr: 1152921504606846976 is beyond 2^53, which memscope's columns cannot hold exactly",
    );
    expect(bad(`{'not': 'a snapshot'}`)).toBe("snapshot: top level: no 'segments' key: not a PyTorch memory snapshot");
    expect(bad(`[1, 2]`)).toBe('snapshot: segments[0]: expected a segment dict, found int 1');
  });

  it('recognised segments read exactly like generic ones, whatever keys and values they have', () => {
    // readSnapshot turns PyTorch-shaped segment dicts into columns (snapshot-builder.ts `segment`);
    // anything else stays a generic dict. Both must give the same model, defaults and errors alike.
    const blk = `{'address': 0, 'size': 512, 'requested_size': 500, 'state': 'active_allocated', 'frames': [{'name': 'f', 'filename': 'a.py', 'line': 3}]}`;
    const shapes = [
      `{'device': 0, 'address': 0, 'total_size': 1024, 'allocated_size': 512, 'active_size': 512, 'requested_size': 500, 'stream': 7, 'segment_type': 'small', 'segment_pool_id': (1, 2), 'is_expandable': True, 'frames': [], 'blocks': [${blk}]}`,
      // missing sizes (derived from the blocks), None where PyTorch allows it, no blocks key
      `{'device': None, 'address': 0, 'total_size': 1024, 'requested_size': None, 'stream': None, 'segment_pool_id': None, 'frames': None, 'blocks': [${blk}]}`,
      `{'device': 1, 'address': 4096, 'total_size': 2048, 'allocated_size': 0, 'active_size': 0}`,
      `{'device': 1, 'address': 4096, 'total_size': 2048, 'blocks': None, 'segment_pool_id': [3, 4], 'is_expandable': False}`,
      // not recognised: an unknown key, a non-bool flag, legacy history blocks
      `{'device': 0, 'address': 0, 'total_size': 1024, 'blocks': [], 'future_key': 1}`,
      `{'device': 0, 'address': 0, 'total_size': 1024, 'blocks': [], 'is_expandable': 1}`,
      `{'device': 0, 'address': 0, 'total_size': 1024, 'blocks': [{'address': 0, 'size': 512, 'state': 'active_allocated', 'history': [{'addr': 0, 'real_size': 500, 'frames': []}]}]}`,
    ];
    for (const shape of shapes) {
      for (const bytes of [pythonPickle(`{'segments': [${shape}, ${shape}]}`, 4), pythonPickle(`{'segments': [${shape}]}`, 2)]) {
        expect(resolved(readSnapshot(bytes))).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
      }
    }
    // Errors name the same field either way.
    for (const bad of [`'allocated_size': None`, `'total_size': 'x'`, `'segment_type': 5`, `'segment_pool_id': (1,)`]) {
      const bytes = pythonPickle(`{'segments': [{'device': 0, 'address': 0, 'total_size': 1, ${bad}}]}`, 4);
      const message = (read: () => unknown): string => {
        try {
          read();
        } catch (e) {
          expect(e).toBeInstanceOf(MemscopeError);
          return (e as Error).message;
        }
        return 'ok';
      };
      const generic = message(() => normaliseSnapshot(readPickle(bytes)));
      expect(generic).toMatch(/^snapshot: segments\[0\]/);
      expect(message(() => readSnapshot(bytes))).toBe(generic);
    }
  });

  it("falls back to the generic reader when a segment's blocks list grows after the segment", () => {
    // Hand-assembled: the segment dict is complete (and recognised, its block ids copied), then
    // BINGET fetches its blocks list again and APPENDs one more block. The generic reader's segment
    // sees both blocks; so must readSnapshot.
    const bytes: number[] = [0x80, 4];
    const str = (t: string): void => void bytes.push(0x8c, t.length, ...Array.from(t, (c) => c.charCodeAt(0)));
    const block = (address: number): void => {
      bytes.push(0x7d, 0x28); // {} MARK (not memoized)
      str('address'), bytes.push(0x4b, address), str('size'), bytes.push(0x4b, 16), str('state'), str('active_allocated');
      bytes.push(0x75); // SETITEMS
    };
    bytes.push(0x7d, 0x94, 0x28); // {} memo0 MARK
    str('segments');
    bytes.push(0x5d, 0x94, 0x28); // [] memo1 MARK
    bytes.push(0x7d, 0x94, 0x28); // {} memo2 MARK
    str('device'), bytes.push(0x4b, 0), str('address'), bytes.push(0x4b, 0), str('total_size'), bytes.push(0x4b, 64);
    str('blocks');
    bytes.push(0x5d, 0x94); // [] memo3
    block(0);
    bytes.push(0x61, 0x75, 0x65); // APPEND SETITEMS (segment) APPENDS (segments)
    bytes.push(0x75); // SETITEMS (top)
    bytes.push(0x68, 3); // BINGET 3: the blocks list again
    block(16);
    bytes.push(0x61, 0x30, 0x2e); // APPEND POP STOP
    const raw = Uint8Array.from(bytes);
    const s = readSnapshot(raw);
    expect(s.segments[0]!.blockCount).toBe(2);
    expect(resolved(s)).toEqual(resolved(normaliseSnapshot(readPickle(raw))));
  });

  it('falls back to the generic reader when a recognised dict is modified after it was built', () => {
    // Hand-assembled (legal, but never written by PyTorch): after the trace entry dict is complete,
    // BINGET fetches it again and SETITEMS adds a key. The fast path must not lose that key.
    const bytes: number[] = [0x80, 4];
    const str = (t: string): void => void bytes.push(0x8c, t.length, ...Array.from(t, (c) => c.charCodeAt(0)));
    bytes.push(0x7d, 0x94, 0x28); // {} memo0 MARK
    str('segments');
    bytes.push(0x5d, 0x94); // [] memo1
    str('device_traces');
    bytes.push(0x5d, 0x94, 0x28, 0x5d, 0x94, 0x28); // [] memo2 MARK [] memo3 MARK
    bytes.push(0x7d, 0x94, 0x28); // {} memo4 MARK
    str('action'), str('alloc'), str('addr'), bytes.push(0x4b, 1), str('size'), bytes.push(0x4b, 2);
    bytes.push(0x75, 0x65, 0x65, 0x75); // SETITEMS APPENDS APPENDS SETITEMS
    bytes.push(0x68, 4, 0x28); // BINGET 4, MARK
    str('user_metadata'), str('late');
    bytes.push(0x75, 0x30, 0x2e); // SETITEMS POP STOP
    const s = readSnapshot(Uint8Array.from(bytes));
    expect(traceEventAt(s, s.traces[0]!, 0)).toMatchObject({ action: 'alloc', addr: 1, size: 2, userMetadata: 'late' });
  });
});
