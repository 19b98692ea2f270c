import { describe, it, expect, vi } from 'vitest';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MemscopeError } from '../../src/core/errors.js';
import { DEFAULT_PICKLE_LIMITS, type PickleLimits } from '../../src/torch/pickle/builder.js';
import { PickleMachine, runPickle } from '../../src/torch/pickle/machine.js';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { SnapshotBuilder } from '../../src/torch/snapshot-builder.js';
import { readSnapshotPieces, readerOf } from '../../src/torch/snapshot-decoder.js';
import { SnapshotTables } from '../../src/torch/snapshot-tables.js';
import { normaliseSnapshot, readSnapshot } from '../../src/torch/index.js';
import { pythonFile, pythonPickle } from './python.js';
import { resolved } from './resolved-snapshot.js';
import { fixture } from '../support/fixtures.js';

// readSnapshot decodes trace entries, blocks and frame lists in fast lanes that skip the VM stack
// (src/torch/snapshot-builder.ts). Limits must not notice: a lane gives way to the general path
// wherever a limit could be reached inside the opcodes it would take, and charges the memory budget
// exactly as the general path does. readPickle has no lanes, so it is the reference.

const FILES = ['torch/older_no_settings_6633blocks.pickle', 'torch/transformer_forward_trace.pickle'];

/** readSnapshotPieces over the bytes, with how many times it read from offset 0 (2: it fell back to the generic reader). */
function readCountingStarts(bytes: Uint8Array): { snap: ReturnType<typeof readSnapshot>; starts: number } {
  let starts = 0;
  const snap = readSnapshotPieces(
    (into, offset) => {
      if (offset === 0) starts++;
      return readerOf(bytes)(into, offset);
    },
    bytes.length,
  );
  return { snap, starts };
}

function outcome(read: () => unknown): string {
  try {
    read();
    return 'ok';
  } catch (e) {
    if (!(e instanceof MemscopeError)) throw e;
    return `${e.code}: ${e.message}`;
  }
}

describe('fast lanes under limits', () => {
  for (const name of FILES) {
    it(`${name.split('/').pop()}: the same limit errors, at the same offsets, as the general path`, () => {
      const bytes = readFileSync(fixture(name));
      const cases: Partial<PickleLimits>[] = [];
      // Depths around a trace entry / block with its frame list (dict, MARK, keys and values, list, MARK, frames).
      for (const maxDepth of [6, 12, 20, 30, 45, 60, 90]) cases.push({ maxDepth });
      for (const maxContainerItems of [4, 9, 10, 11, 20, 40]) cases.push({ maxContainerItems });
      // Budgets that run out early, midway and near the end of the file.
      for (const f of [0.01, 0.1, 0.5, 1, 2, 4, 6, 8, 9, 10, 12]) cases.push({ maxBytes: Math.round(bytes.length * f) + 7 });
      for (const f of [0.01, 0.2, 0.6, 0.9]) cases.push({ maxMemoEntries: Math.round((bytes.length / 40) * f) });
      let failures = 0;
      for (const limits of cases) {
        const generic = outcome(() => readPickle(bytes, limits));
        expect({ limits, result: outcome(() => readSnapshot(bytes, { limits })) }).toEqual({ limits, result: generic });
        if (generic !== 'ok') failures++;
      }
      // The cases must really reach the limits (and some must pass), or this proves nothing.
      expect(failures).toBeGreaterThan(cases.length / 2);
      expect(failures).toBeLessThan(cases.length);
    });
  }

  it('a lane gives way where a later, deeper or bigger entry reaches a limit', () => {
    // Written by CPython: the first entry and block define the frames (general path); later ones
    // refer to them (lanes) with longer frame lists, so limits are first reached inside a lane's span.
    const bytes = pythonPickle(
      `{'segments': [{'address': 0, 'total_size': 512, 'blocks': [
          {'address': 0, 'size': 256, 'requested_size': 256, 'state': 'active_allocated', 'frames': fs[:2]},
          {'address': 256, 'size': 256, 'requested_size': 200, 'state': 'active_allocated', 'frames': fs * 6}]}],
        'device_traces': [[
          {'action': 'alloc', 'addr': 0, 'size': 256, 'stream': 0, 'time_us': 1, 'frames': fs},
          {'action': 'alloc', 'addr': 256, 'size': 256, 'stream': 0, 'time_us': 2, 'frames': fs * 4},
          {'action': 'free_requested', 'addr': 0, 'size': 256, 'stream': 0, 'time_us': 3, 'frames': fs * 9}]]}`,
      4,
      `fs = [{'name': f'f{i}', 'filename': 'x.py', 'line': i} for i in range(5)]`,
    );
    const cases: Partial<PickleLimits>[] = [];
    for (let maxDepth = 20; maxDepth <= 80; maxDepth += 3) cases.push({ maxDepth });
    for (let maxContainerItems = 8; maxContainerItems <= 48; maxContainerItems += 4) cases.push({ maxContainerItems });
    for (let maxBytes = 1000; maxBytes <= 4000; maxBytes += 150) cases.push({ maxBytes });
    const results = new Set<string>();
    for (const limits of cases) {
      const generic = outcome(() => readPickle(bytes, limits));
      expect({ limits, result: outcome(() => readSnapshot(bytes, { limits })) }).toEqual({ limits, result: generic });
      results.add(generic);
    }
    // Errors at many different offsets, and some successes.
    expect(results.size).toBeGreaterThan(10);
    expect(results.has('ok')).toBe(true);
  });
});

describe('fast lanes and a re-PUT memo slot', () => {
  it('a slot a lane filled, overwritten by BINPUT, is read with its new value (no stale key cache)', () => {
    // Hand-assembled (CPython never re-PUTs): entry 2's lane memoizes the new string 'stream' as
    // its compile_context; entry 3 uses that slot as a key; BINPUT then puts 'time_us' in the same
    // slot, and entry 4 uses it as a key again, so entry 4 must get time_us = 6, not stream = 6.
    const out: number[] = [0x80, 4, 0x7d, 0x94, 0x28];
    let memo = 1;
    const slot: Record<string, number> = {};
    const str = (s: string): void => {
      const known = slot[s];
      if (known !== undefined) {
        out.push(0x68, known);
        return;
      }
      out.push(0x8c, s.length, ...Buffer.from(s, 'latin1'), 0x94);
      slot[s] = memo++;
    };
    const entry = (pairs: [string, number | string][], keyGet: Record<string, number> = {}): void => {
      out.push(0x7d, 0x94, 0x28);
      memo++;
      for (const [k, v] of pairs) {
        if (keyGet[k] !== undefined) out.push(0x68, keyGet[k]!);
        else str(k);
        if (typeof v === 'number') out.push(0x4b, v);
        else str(v);
      }
      out.push(0x75);
    };
    str('segments');
    out.push(0x5d, 0x94);
    memo++;
    str('device_traces');
    out.push(0x5d, 0x94, 0x28, 0x5d, 0x94, 0x28);
    memo += 2;
    entry([['action', 'alloc'], ['addr', 1], ['size', 2], ['compile_context', 'x']]);
    // Entry 2 (lane): compile_context is a new string, 'stream', memoized by the lane.
    const streamSlot = memo + 1; // after the dict's own slot
    out.push(0x7d, 0x94, 0x28);
    memo++;
    out.push(0x68, slot['action']!, 0x68, slot['alloc']!, 0x68, slot['addr']!, 0x4b, 3, 0x68, slot['size']!, 0x4b, 4);
    out.push(0x68, slot['compile_context']!, 0x8c, 6, ...Buffer.from('stream'), 0x94, 0x75);
    memo++;
    entry([['action', 'alloc'], ['addr', 5], ['size', 6], ['stream', 7]], { stream: streamSlot });
    // Re-PUT the lane's slot with 'time_us' (push, BINPUT, POP inside the batch).
    out.push(0x8c, 7, ...Buffer.from('time_us'), 0x71, streamSlot, 0x30);
    entry([['action', 'alloc'], ['addr', 8], ['size', 9], ['stream', 6]], { stream: streamSlot });
    out.push(0x65, 0x65, 0x75, 0x2e);
    const bytes = Uint8Array.from(out);
    const generic = readPickle(bytes) as Map<string, unknown>;
    const entries = (generic.get('device_traces') as unknown[][])[0] as Map<string, unknown>[];
    expect(entries.map((e) => [...e.keys()].join(','))).toEqual([
      'action,addr,size,compile_context',
      'action,addr,size,compile_context',
      'action,addr,size,stream',
      'action,addr,size,time_us',
    ]);
    const snap = readSnapshot(bytes);
    const t = snap.traces[0]!;
    expect(t.count).toBe(4);
    expect(Array.from(t.stream)).toEqual([0, 0, 7, 0]);
    expect(Array.from(t.timeUs)).toEqual([NaN, NaN, NaN, 6]);
  });
});

describe('frame lists recognised by their bytes', () => {
  // The lanes remember each frame list's bytes and reuse its stack when the same bytes come again
  // (src/torch/snapshot-builder.ts, `isKnownList`). The generic reader is the reference.
  const script = resolve(import.meta.dirname, 'make-frame-list-pickles.py');
  const framesOf = (snap: ReturnType<typeof readSnapshot>, i: number): string[] => {
    const t = snap.traces[0]!;
    const stack = t.stack[i]!;
    return Array.from(snap.stacks.frameIds.subarray(snap.stacks.offsets[stack]!, snap.stacks.offsets[stack + 1]!), (id) => snap.frames[id]!.name);
  };
  const expectLikeGeneric = (bytes: Uint8Array): string[][] => {
    const generic = readPickle(bytes) as Map<string, unknown>;
    const entries = (generic.get('device_traces') as Map<string, unknown>[][])[0]!;
    const snap = readSnapshot(bytes);
    const got = entries.map((_, i) => [snap.actionNames[snap.traces[0]!.action[i]!]!, ...framesOf(snap, i)]);
    const want = entries.map((e) => [e.get('action') as string, ...(e.get('frames') as Map<string, unknown>[]).map((f) => f.get('name') as string)]);
    expect(got).toEqual(want);
    return got;
  };

  it('two lists of the same length and hash (indices 65536 apart) keep their own stacks', () => {
    const bytes = new Uint8Array(pythonFile(script));
    const rows = expectLikeGeneric(bytes);
    // Both lists occur many times, after each other, so each is looked up while the other is cached.
    expect(rows.filter((r) => r[1] === 'fa')).toHaveLength(14);
    expect(rows.filter((r) => r[1] === 'fb')).toHaveLength(26);
  });

  it('a list where the list expected next is not is read as itself', () => {
    // The reader first tries the list that followed the last three before (`listAfter`): here C,
    // each time, before a list that begins with C's bytes, one that is C's beginning, one of C's
    // length, and (outside the trace) the top-level list 'post'.
    const bytes = new Uint8Array(pythonFile(resolve(import.meta.dirname, 'make-predicted-list-pickle.py')));
    const rows = expectLikeGeneric(bytes);
    const lists = rows.map((r) => r.slice(1).join(' '));
    expect(lists.length).toBe(47);
    expect([lists[17], lists[20], lists[29], lists[38], lists[44], lists[45]]).toEqual(['f4 f5 f6', 'f4 f5 f6 f7', 'f4 f5', 'f7 f5 f6', 'f4 f5 f6', 'f1 f2']);
    const snap = readSnapshot(bytes);
    expect(snap.format.unknownKeys).toEqual(['pre', 'post', 'end']);
    expect((snap.extra['post'] as { name: string }[]).map((frame) => frame.name)).toEqual(['f4', 'f5', 'f6', 'f7']);
    // Read by the fast path to the end: a wrong guess taken would leave the machine inside an
    // opcode, and the reader would start again from byte 0 with the generic path (its second
    // read at offset 0 here), hiding the mistake in the result.
    const pieces = readCountingStarts(bytes);
    expect(pieces.starts).toBe(1);
    expect(resolved(pieces.snap)).toEqual(resolved(snap));
  });

  it('a re-PUT frame or action name is read with its new value, not a remembered one', () => {
    const bytes = new Uint8Array(pythonFile(script, ['reput']));
    const rows = expectLikeGeneric(bytes);
    expect(rows.slice(18, 24)).toEqual([
      ['alloc', 'fa', 'fc'],
      ['free_requested', 'fb', 'fc'],
      ['free_completed', 'fb', 'fz'],
      ['free_requested', 'fa', 'fz'],
      ['free_completed', 'fb', 'fz'],
      ['free_requested', 'fb', 'fz'],
    ]);
  });
});

describe('the segment lane', () => {
  // Segments are read by a lane too (`fastSegment`), which reads their blocks through the block
  // lane as it goes and undoes them if it then gives up. The generic reader is the reference; a
  // builder that records the segment dicts reaching the general path shows which ones the lane took.
  const script = resolve(import.meta.dirname, 'make-segment-pickles.py');
  const make = (variant?: string): Uint8Array => new Uint8Array(pythonFile(script, variant ? [variant] : []));

  /**
   * Indices of the segments whose dicts reached the general path (SETITEMS with first key
   * 'device'), and how many blocks the builder stored (a lane that gives up must take back the
   * blocks it stored, or they would be stored twice).
   */
  const generalSegments = (bytes: Uint8Array): { segments: number[]; storedBlocks: number } => {
    const seen: number[] = [];
    class Recording extends SnapshotBuilder {
      override setItems(target: unknown, stack: unknown[], start: number, end: number, at: number): void {
        if (stack[start] === 'device') {
          const address = stack[stack.indexOf('address', start) + 1] as number;
          seen.push(Math.round((address - 2 ** 47 - 2 ** 31) / 2 ** 33));
        }
        super.setItems(target, stack, start, end, at);
      }
    }
    // A memo index as big as the file: the lanes give up on memo indices beyond it (this file has
    // more memo entries per byte than readSnapshot's guess, whose index then grows).
    const tables = new SnapshotTables();
    runPickle(bytes, new Recording(tables, bytes.length), { ...DEFAULT_PICKLE_LIMITS });
    return { segments: seen, storedBlocks: tables.bSize.length };
  };

  it('reads every shape PyTorch writes as the generic reader does, and leaves the rest to it', () => {
    const bytes = make();
    const snap = readSnapshot(bytes);
    // (Stack ids may differ: the lane interns a segment's stack before its blocks'.)
    expect(resolved(snap)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
    // 0 defines the frames; 5's blocks hold a FRAME opcode, 9 has an unknown key and 10 a legacy
    // block, each after blocks the lane had read already.
    // (Every block but the legacy one, which the assembler reads later, is stored once.)
    expect(generalSegments(bytes)).toEqual({ segments: [0, 5, 9, 10], storedBlocks: 1512 });
    // The pool tuple segment 7's lane released, rebuilt for a later GET.
    expect(snap.extra).toEqual({ pool: [3, 4] });
    expect(snap.segments.map((s) => s.blockCount)).toEqual([1, 3, 1, 0, 0, 1500, 1, 1, 1, 2, 2, 1]);
    expect(snap.blocks.count).toBe(1513);
    const s = snap.segments;
    expect([s[2]!.segmentType, s[2]!.poolId, s[2]!.isExpandable]).toEqual(['small', null, true]);
    expect([s[3]!.device, s[3]!.requestedSize, s[3]!.stream]).toEqual([-1, null, 0]);
    expect([s[5]!.stream, s[6]!.device, s[6]!.allocatedSize, s[8]!.poolId]).toEqual([140000000000, -1, 0, [3, 4]]);
    expect(snap.stateNames[snap.blocks.state[s[6]!.firstBlock]!]).toBe('weird_state');
  });

  it('gives the same result when the file is read in pieces cut anywhere', () => {
    const bytes = make();
    const whole = resolved(readSnapshot(bytes));
    for (const pieceBytes of [64, 97, 256, 1000, 4099]) {
      expect(resolved(readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes }))).toEqual(whole);
    }
  });

  it('a re-PUT segment_type string is read with its new value, not a remembered one', () => {
    const bytes = make('reput');
    const snap = readSnapshot(bytes);
    expect(resolved(snap)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
    expect(snap.segments.map((s) => s.segmentType).join(' ')).toBe('large large small large large huge huge huge huge huge huge huge');
  });

  it('the same limit errors, at the same offsets, as the general path', () => {
    const bytes = make();
    const results = new Set<string>();
    const cases: Partial<PickleLimits>[] = [];
    for (let maxDepth = 4; maxDepth <= 40; maxDepth += 3) cases.push({ maxDepth });
    for (const maxContainerItems of [10, 12, 100, 1000, 1499, 1500]) cases.push({ maxContainerItems });
    for (let f = 0.05; f < 2; f += 0.1) cases.push({ maxBytes: Math.round(bytes.length * f) + 3 });
    for (const maxMemoEntries of [100, 500, 1000, 2000, 3000]) cases.push({ maxMemoEntries });
    for (const limits of cases) {
      const generic = outcome(() => readPickle(bytes, limits));
      expect({ limits, result: outcome(() => readSnapshot(bytes, { limits })) }).toEqual({ limits, result: generic });
      results.add(generic);
    }
    expect(results.size).toBeGreaterThan(15);
    expect(results.has('ok')).toBe(true);
  });
});

describe('ints in the lanes', () => {
  it('every LONG1 length and sign, and the ends of the safe range, read as the generic reader reads them', () => {
    // CPython writes ints outside BININT's range as LONG1 with 1–8 bytes here; the lanes decode
    // them straight from the bytes, the generic reader through the VM stack.
    const values = [0, 1, -1, 255, -256, 2 ** 31, -(2 ** 31) - 1, 2 ** 32, -(2 ** 32), 2 ** 39 + 5, -(2 ** 39) - 5, 2 ** 47, -(2 ** 47)];
    values.push(2 ** 55 / 4 - 1, -(2 ** 55 / 4) + 1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 2 ** 52 + 1, -(2 ** 52) - 1);
    const bytes = pythonPickle(
      `{'segments': [{'address': 0, 'total_size': 512, 'blocks': [{'address': 0, 'size': 512, 'state': 'inactive', 'frames': fs}]}],
        'device_traces': [[{'action': 'alloc', 'addr': v, 'size': 512, 'stream': -v, 'time_us': v, 'frames': fs} for v in vs]]}`,
      4,
      `fs = [{'name': 'f', 'filename': 'x.py', 'line': 1}]\nvs = ${JSON.stringify(values.map(String))}\nvs = [int(v) for v in vs]`,
    );
    const snap = readSnapshot(bytes);
    expect(resolved(snap)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
    const t = snap.traces[0]!;
    expect(Array.from(t.addr)).toEqual(values);
    expect(Array.from(t.stream)).toEqual(values.map((v) => (v === 0 ? 0 : -v)));
    // Just past the safe range (a BigInt to the generic reader): the lane gives the entry up, and
    // the result, or the error, is the generic reader's.
    for (const edge of ['-(2**53)', '2**53', '-(2**63)', '2**63 - 1']) {
      const big = pythonPickle(
        `{'segments': [], 'device_traces': [[{'action': 'alloc', 'addr': 512 * i, 'size': 512, 'stream': 0, 'time_us': i, 'frames': []} for i in range(3)]
          + [{'action': 'alloc', 'addr': 4096, 'size': 512, 'stream': 0, 'time_us': ${edge}, 'frames': []}]]}`,
        4,
      );
      const generic = outcome(() => resolved(normaliseSnapshot(readPickle(big))));
      expect(outcome(() => resolved(readSnapshot(big)))).toEqual(generic);
    }
  });
});

describe('the byte budget held in slices', () => {
  // The machine counts the maxBytes budget down in slices below 2^30 (`PickleMachine.refill`),
  // refilled from the rest when one runs out. With slices of a few bytes, refills happen at
  // nearly every charging opcode and lanes give way at slice ends: the outcome, and the offset of
  // a limit error, must be the same as with one slice that holds the whole budget.
  it('gives the same result and the same limit errors whatever the slice', () => {
    const bytes = new Uint8Array(readFileSync(fixture('torch/transformer_forward_trace.pickle')));
    const read = (maxBytes: number, slice: number): string => {
      const limits = { ...DEFAULT_PICKLE_LIMITS, maxBytes };
      const tables = new SnapshotTables();
      const machine = new PickleMachine(new SnapshotBuilder(tables, Math.floor(bytes.length / 40), limits.maxContainerItems), limits, undefined, slice);
      return outcome(() => machine.run(bytes, 0, true, bytes.length)) + ` ${tables.tAddr.length} events ${tables.bSize.length} blocks`;
    };
    const results = new Set<string>();
    for (const maxBytes of [bytes.length, bytes.length * 3, bytes.length * 6, bytes.length * 9, 2 ** 33]) {
      const whole = read(maxBytes, 2 ** 40);
      for (const slice of [1, 7, 64, 1000, 65536]) expect({ maxBytes, slice, result: read(maxBytes, slice) }).toEqual({ maxBytes, slice, result: whole });
      results.add(whole.split(' ')[0]!);
    }
    // Both outcomes occur: some budgets run out, some do not.
    expect(results.has('ok')).toBe(true);
    expect(results.size).toBeGreaterThan(1);
  });
});

describe('device trace lists as rows of the trace columns', () => {
  it('a list whose entries are not one consecutive run (a shared entry, an entry the lanes leave, a device after another) reads as the generic reader reads it', () => {
    // Recognised entries get consecutive ids as they are read, so a device's list is normally one
    // run (IdList keeps first and count). These lists break the run: device 0 holds entry `e`
    // twice (a GET of the same dict), device 1 holds an entry with an unknown key (the general
    // path, which stores its row after every recognised one), device 2 is an ordinary run.
    const bytes = pythonPickle(
      `{'segments': [], 'device_traces': [
          [e, mk(1), e, mk(2)],
          [mk(3), dict(mk(4), extra_key=7), mk(5)],
          [mk(6), mk(7)]]}`,
      4,
      `def mk(i): return {'action': 'alloc', 'addr': 512 * i, 'size': 512 + i, 'stream': 0, 'time_us': i, 'frames': [{'name': 'f', 'filename': 'x.py', 'line': i}]}\ne = mk(0)`,
    );
    const snap = readSnapshot(bytes);
    expect(resolved(snap)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
    expect(snap.traces.map((t) => Array.from(t.timeUs))).toEqual([
      [0, 1, 0, 2],
      [3, 4, 5],
      [6, 7],
    ]);
    expect(snap.traces.map((t) => Array.from(t.size))).toEqual([
      [512, 513, 512, 514],
      [515, 516, 517],
      [518, 519],
    ]);
    for (const pieceBytes of [64, 200]) expect(resolved(readSnapshotPieces(readerOf(bytes), bytes.length, { pieceBytes }))).toEqual(resolved(snap));
  });
});

describe('frames lists held by more than one dict', () => {
  // A frames list is one Python object: every block and trace entry that refers to it (a memo GET)
  // sees the same list, however it was written and whatever happens to it later. The generic
  // reader is the reference; the files come from make-shared-list-pickles.py.
  const script = resolve(import.meta.dirname, 'make-shared-list-pickles.py');
  const stackLengths = (snap: ReturnType<typeof readSnapshot>): number[] =>
    Array.from(snap.traces[0]!.stack, (s) => snap.stacks.offsets[s + 1]! - snap.stacks.offsets[s]!);

  it('a list longer than one APPENDS batch is the whole list wherever it is fetched again', () => {
    // 1,500 and 2,500 frames: CPython writes 1,000 per APPENDS. The reader interns a list at its
    // first APPENDS; a GET after the last one must not fetch that first batch alone.
    const bytes = new Uint8Array(pythonFile(script, ['long']));
    const generic = resolved(normaliseSnapshot(readPickle(bytes)));
    const snap = readSnapshot(bytes);
    expect(resolved(snap)).toEqual(generic);
    expect(stackLengths(snap)).toEqual([1500, 2500, 1500, 2500, 2500]);
    const block = snap.blocks.stack[0]!;
    expect(snap.stacks.offsets[block + 1]! - snap.stacks.offsets[block]!).toBe(1500);
    // Read through to the end without falling back to the generic reader.
    const pieces = readCountingStarts(bytes);
    expect(pieces.starts).toBe(1);
    expect(resolved(pieces.snap)).toEqual(generic);
  });

  it('one empty frames list shared by every block, segment and entry (as PyTorch writes it) is read by the lanes', () => {
    const bytes = new Uint8Array(pythonFile(script, ['empty-shared']));
    const laneHits = vi.spyOn(SnapshotBuilder.prototype, 'fastDict');
    try {
      const snap = readSnapshot(bytes);
      expect(resolved(snap)).toEqual(resolved(normaliseSnapshot(readPickle(bytes))));
      expect(stackLengths(snap)).toEqual([0, 0, 0, 0]);
      // 2 segments of 3 blocks, 4 entries. Only the first block and entry (whose key strings are
      // new) and the first segment around them are left to the general path. The lanes take blocks
      // 1 and 2 of the first segment, the second segment with its blocks (one call), and entries 1
      // to 3: 6 calls that succeed. Before the lanes took the general path's empty list, none did.
      expect(laneHits.mock.results.filter((r) => (r.value as number) > 0)).toHaveLength(6);
    } finally {
      laneHits.mockRestore();
    }
  });

  for (const mode of ['after-entry', 'after-lane', 'after-get', 'reput']) {
    it(`${mode}: a list changed after a dict took it reads as Python reads it`, () => {
      // Hand-made (no pickler writes these): a list extended after an entry took it, which the
      // entry must see; or a list whose memo slot was re-PUT, which a later GET must not see.
      const bytes = new Uint8Array(pythonFile(script, [mode]));
      const generic = resolved(normaliseSnapshot(readPickle(bytes)));
      const expected = { 'after-entry': [3, 2], 'after-lane': [2, 1], 'after-get': [3, 3], reput: [3, 2] }[mode];
      const snap = readSnapshot(bytes);
      expect(stackLengths(snap)).toEqual(expected);
      expect(resolved(snap)).toEqual(generic);
      // The fast path cannot change what it stored for an entry, so it hands such a file to the
      // generic reader.
      const pieces = readCountingStarts(bytes);
      expect(pieces.starts).toBe(2);
      expect(resolved(pieces.snap)).toEqual(generic);
    });
  }
});
