// The short, seeded run of the fuzz harness (the long one: `npm run fuzz`, scripts/fuzz.mjs):
// mutants of the small snapshots, traces and a capture in test/fixtures through every reader.
// Every outcome must be a result or a MemscopeError, each input read within the time limit.
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { cutTrace, mulberry32, mutate, readersFor, runReaders, timelineSeed, type FuzzKind } from '../../scripts/fuzz-core.mjs';
import { isMemscopeError, MemscopeError } from '../../src/core/errors.js';
import { CaptureRecorder } from '../../src/capture/recorder.js';
import { CaptureWriter } from '../../src/capture/writer.js';
import { parseCapture } from '../../src/capture/reader.js';
import type { ModuleRef, StorageRef, EventContext } from '../../src/core/events.js';
import { readChromeTrace } from '../../src/torch/chrome-trace.js';
import { readMemoryTimeline } from '../../src/torch/memory-timeline.js';
import { readPickle } from '../../src/torch/pickle/reader.js';
import { formatFrame, fragmentation } from '../../src/torch/snapshot-analysis.js';
import { normaliseSnapshot, readerOf, readSnapshot, readSnapshotPieces } from '../../src/torch/snapshot-decoder.js';
import { captureToReport } from '../../src/viewer/report-data.js';
import { fixture } from '../support/fixtures.js';

const MUTANTS = 400;
const SEED = 20261127;
/** Per input, every reader together (the budget is 30 s; these inputs are small). */
const TIME_LIMIT_MS = 10_000;

/** A small capture with modules, storages and a kernel, written by memscope's own writer. */
function captureSeed(): string {
  let text = '';
  const writer = new CaptureWriter({ write: (c) => (text += c) }, { created: '2026-01-01', argv: ['train.js'], backend: null, stacks: true, maxEntries: null });
  const rec = new CaptureRecorder(writer, { stacks: true });
  const parent: ModuleRef = { id: 1, path: 'model', className: 'Sequential', parent: null, children: [], parameters: () => [], buffers: () => [] };
  const child: ModuleRef = { id: 2, path: 'model.0', className: 'Dense', parent, children: [], parameters: () => [], buffers: () => [] };
  for (let step = 0; step < 3; step++) {
    const ctx: EventContext = { phase: 'forward', module: child, kernel: 'MatMul', step, seq: step };
    rec.onModuleEnter(parent, [], ctx);
    rec.onModuleEnter(child, [], ctx);
    const s: StorageRef = { id: 10 + step, device: 'webgl', bytes: 4096 * (step + 1), dtype: 'float32', shape: [1024 * (step + 1)] };
    rec.onStorageAlloc(s, ctx);
    if (step > 0) rec.onStorageFree({ ...s, id: 9 + step }, ctx);
    rec.onModuleExit(child, [], ctx);
    rec.onModuleExit(parent, [], ctx);
  }
  rec.finish({ exitCode: 0, error: null });
  return text;
}

describe('fuzz: mutants of every kind of input through every reader', () => {
  it(`${MUTANTS} seeded mutants end in a result or a MemscopeError, each within ${TIME_LIMIT_MS} ms`, () => {
    const encode = (s: string): Uint8Array => new TextEncoder().encode(s);
    const seeds: { name: string; kind: FuzzKind; bytes: Uint8Array }[] = [
      ...['small_3seg.pickle', 'state_only_259seg.pickle', 'older_no_settings_6633blocks.pickle', 'newest_format_trace.pickle'].map((f) => ({
        name: f,
        kind: 'pickle' as const,
        bytes: new Uint8Array(readFileSync(fixture(`torch/${f}`))),
      })),
      ...['kineto_modern_memory.json.gz', 'kineto_2021_resnet50.json.gz'].map((f) => ({
        name: f,
        kind: 'trace' as const,
        bytes: encode(cutTrace(gunzipSync(readFileSync(fixture(`traces/${f}`))).toString('utf8'), 300)),
      })),
      { name: 'timeline', kind: 'timeline', bytes: encode(timelineSeed()) },
      { name: 'capture', kind: 'capture', bytes: encode(captureSeed()) },
    ];
    const readers = readersFor({ readSnapshot, readSnapshotPieces, readerOf, normaliseSnapshot, readPickle, fragmentation, formatFrame, readChromeTrace, readMemoryTimeline, parseCapture, captureToReport, MemscopeError } as never);
    // Every seed reads as it is: the mutants start from valid files.
    for (const s of seeds) for (const o of runReaders(readers, s.kind, s.bytes, isMemscopeError)) expect(`${s.name} ${o.reader} ${o.outcome} ${o.message ?? ''}`).toBe(`${s.name} ${o.reader} result `);
    const rand = mulberry32(SEED);
    const counts = { result: 0, error: 0, crash: 0 };
    const problems: string[] = [];
    for (let i = 0; i < MUTANTS; i++) {
      const seed = seeds[i % seeds.length]!;
      const bytes = mutate(seed.bytes, rand, seed.kind !== 'pickle');
      const outcomes = runReaders(readers, seed.kind, bytes, isMemscopeError);
      let ms = 0;
      for (const o of outcomes) {
        counts[o.outcome]++;
        ms += o.ms;
        if (o.outcome === 'crash') problems.push(`mutant ${i} of ${seed.name} (seed ${SEED}), ${o.reader}: ${o.stack}`);
      }
      if (ms > TIME_LIMIT_MS) problems.push(`mutant ${i} of ${seed.name} (seed ${SEED}) took ${ms.toFixed(0)} ms`);
    }
    expect(problems).toEqual([]);
    // Both outcomes occur: the mutants reach past the readers' first checks.
    expect(counts.result).toBeGreaterThan(MUTANTS / 10);
    expect(counts.error).toBeGreaterThan(MUTANTS / 10);
  });
});
