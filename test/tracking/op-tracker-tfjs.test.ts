// MemoryTracker on real TensorFlow.js models (cpu backend): names, phases,
// markers, figures against TFJS's own byte count, summary, save/load, plots.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { beforeAll, describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import type { MemoryEventSink } from '../../src/core/events.js';
import { tfjsAdapter } from '../../src/tfjs/adapter.js';
import { MemoryTracker } from '../../src/tfjs/memory-tracker.js';
import { operatorOf, recordDeltas } from '../../src/tracking/op-traces.js';
import { launchChromium } from '../support/browser.js';
import { allElements, parseXml } from '../support/xml-wellformed.js';

const BATCH = 8;
const UNITS = 16;

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** net: d1 (Dense, relu) → bn (BatchNorm) → inner (Sequential: inner_dense) → head (Dense). */
function buildNet(): tfl.Sequential {
  const inner = tfl.sequential({
    name: 'inner',
    layers: [tfl.layers.dense({ name: 'inner_dense', inputShape: [UNITS], units: UNITS, kernelInitializer: tfl.initializers.glorotUniform({ seed: 3 }) })],
  });
  return tfl.sequential({
    name: 'net',
    layers: [
      tfl.layers.dense({ name: 'd1', inputShape: [4], units: UNITS, activation: 'relu', kernelInitializer: tfl.initializers.glorotUniform({ seed: 1 }) }),
      tfl.layers.batchNormalization({ name: 'bn' }),
      inner,
      tfl.layers.dense({ name: 'head', units: 2, kernelInitializer: tfl.initializers.glorotUniform({ seed: 2 }) }),
    ],
  });
}

function data() {
  return {
    xs: tf.randomUniform([BATCH, 4], -1, 1, 'float32', 11),
    ys: tf.randomUniform([BATCH, 2], -1, 1, 'float32', 12),
  };
}

function trainSteps(model: tfl.LayersModel, optimizer: tf.Optimizer, xs: tf.Tensor, ys: tf.Tensor, steps: number): void {
  for (let i = 0; i < steps; i++) {
    const loss = optimizer.minimize(() => tf.losses.meanSquaredError(ys, model.apply(xs, { training: true }) as tf.Tensor) as tf.Scalar, true);
    loss?.dispose();
  }
}

/**
 * Runs two training steps under a MemoryTracker and, beside it, a naive
 * witness: a plain map of every live cpu storage the adapter reports, summed
 * at each top-level kernel end. (TFJS's tf.memory().numBytes cannot serve:
 * it counts every tensor handle, so a dataId shared by clones counts twice.)
 */
function traceTwoSteps() {
  const model = buildNet();
  const optimizer = tf.train.adam(0.01);
  const { xs, ys } = data();
  const tracker = new MemoryTracker();
  tracker.startMonitor(model, { optimizer });
  // Subscribed after the tracker, so it sees each kernel end right after the tracker did.
  let depth = 0;
  const live = new Map<number, number>();
  const sum = () => [...live.values()].reduce((a, b) => a + b, 0);
  const witnessBytes: number[] = [];
  // A storage made before monitoring and met later was allocated all along (memory_allocated()
  // counts it from the start): the baseline and every figure so far hold it too.
  let metLater = 0;
  const witness: MemoryEventSink = {
    onStorageAlloc: (s) => {
      if (s.device !== 'cpu' || live.has(s.id)) return;
      live.set(s.id, s.bytes);
      if (s.adopted) {
        metLater += s.bytes;
        for (let i = 0; i < witnessBytes.length; i++) witnessBytes[i]! += s.bytes;
      }
    },
    onStorageFree: (s) => void live.delete(s.id),
    onKernelStart: () => void depth++,
    onKernelEnd: (k) => {
      depth--;
      if (depth === 0 && k.outputs.length > 0) witnessBytes.push(sum());
    },
  };
  const session = tfjsAdapter.attach(witness);
  for (const s of session.liveStorages()) if (s.device === 'cpu') live.set(s.id, s.bytes);
  const witnessBaseline = sum();
  try {
    trainSteps(model, optimizer, xs, ys, 2);
  } finally {
    session.detach();
    tracker.stop();
  }
  const result = { tracker, witnessBytes, witnessBaseline: witnessBaseline + metLater };
  model.dispose();
  optimizer.dispose();
  xs.dispose();
  ys.dispose();
  return result;
}

const layerOf = (name: string): string => name.slice(0, name.lastIndexOf('.', name.lastIndexOf('.') - 1));
const phaseOf = (name: string): string => name.split('.').at(-2)!;
/** Consecutive duplicates removed. */
const runs = (xs: string[]): string[] => xs.filter((x, i) => i === 0 || xs[i - 1] !== x);

describe('MemoryTracker on a real TFJS model (cpu)', () => {
  const traced = (() => {
    let cached: ReturnType<typeof traceTwoSteps> | null = null;
    return () => (cached ??= traceTwoSteps());
  })();

  it('names every record <layer path>.<phase>.<Kernel>_<n>, with Dense, BatchNorm and the nested model in both phases', () => {
    const { tracker } = traced();
    const names = tracker.records.map((r) => r.name);
    expect(names.length).toBeGreaterThan(50);
    for (const name of names) expect(name).toMatch(/^(net(\.[\w]+)*|\(no layer\))\.(forward|backward|optimizer)\.[A-Za-z]\w*_\d+$/);
    // n counts calls of each kernel name, in order, across the session.
    const seen = new Map<string, number>();
    for (const name of names) {
      const m = /\.([A-Za-z]\w*)_(\d+)$/.exec(name)!;
      expect(Number(m[2])).toBe(seen.get(m[1]!) ?? 0);
      seen.set(m[1]!, Number(m[2]) + 1);
    }
    const layers = new Set(names.map((n) => `${layerOf(n)}.${phaseOf(n)}`));
    for (const expected of [
      'net.d1.forward',
      'net.d1.backward',
      'net.bn.forward',
      'net.bn.backward',
      'net.inner.inner_dense.forward',
      'net.inner.inner_dense.backward',
      'net.head.forward',
      'net.head.backward',
      '(no layer).optimizer',
    ]) {
      expect(layers, expected).toContain(expected);
    }
    expect(names.some((n) => /^net\.bn\.forward\.FusedBatchNorm_\d+$/.test(n))).toBe(true);
    // Nested kernels are not operator calls: the Identity clones TFJS runs inside a
    // kernel to save inputs for backward never appear in forward, and the fused
    // matMul composite (Dense without activation) is one record, not its inner kernels.
    expect(names.filter((n) => /\.forward\.Identity_/.test(n))).toEqual([]);
    const innerForward = names.filter((n) => n.startsWith('net.inner.inner_dense.forward.')).map((n) => n.split('.').at(-1)!.replace(/_\d+$/, ''));
    // (fused.matMul reshapes its inputs outside the customGrad, then runs it; BatchMatMul inside it is not recorded.)
    expect(innerForward).toEqual(['Reshape', 'Reshape', 'fusedMatMul', 'Reshape', 'Reshape', 'fusedMatMul']);
    // Optimizer updates are never attributed to a layer.
    expect(names.filter((n) => phaseOf(n) === 'optimizer').every((n) => n.startsWith('(no layer).'))).toBe(true);
  });

  it('puts one fw_start / fw_bw_boundary pair per step at the first and after the last layer-forward kernel', () => {
    const { tracker } = traced();
    const { records, markers } = tracker;
    expect(markers.map((m) => `${m.name}@${m.step}`)).toEqual(['fw_start@0', 'fw_bw_boundary@0', 'fw_start@1', 'fw_bw_boundary@1']);
    const [start0, end0, start1, end1] = markers.map((m) => m.index) as [number, number, number, number];
    expect(start0).toBe(0);
    for (const [start, end] of [
      [start0, end0],
      [start1, end1],
    ] as const) {
      const forward = records.slice(start, end).map((r) => r.name);
      // Every kernel inside the root's forward ran in a layer, in forward, in layer order.
      expect(forward.every((n) => phaseOf(n) === 'forward' && n.startsWith('net.'))).toBe(true);
      expect(runs(forward.map(layerOf))).toEqual(['net.d1', 'net.bn', 'net.inner.inner_dense', 'net.head']);
      // The loss right after the boundary is outside every layer; backward visits layers in reverse.
      expect(records[end]!.name).toMatch(/^\(no layer\)\.forward\./);
      const nextStart = end === end0 ? start1 : records.length;
      const after = records.slice(end, nextStart).map((r) => r.name);
      expect(runs(after.filter((n) => phaseOf(n) === 'backward' && n.startsWith('net.')).map(layerOf))).toEqual([
        'net.head',
        'net.inner.inner_dense',
        'net.bn',
        'net.d1',
      ]);
      expect(after.slice(-1)[0]).toMatch(/^\(no layer\)\.optimizer\./);
    }
    expect(records[start1 - 1]!.step).toBe(0);
    expect(records[start1]!.step).toBe(1);
  });

  it('allocated is the live storage bytes at every top-level kernel end; active and reserved equal it on cpu', () => {
    const { tracker, witnessBytes, witnessBaseline } = traced();
    const { records } = tracker;
    expect(witnessBytes).toHaveLength(records.length);
    expect(tracker.stats().baseline.allocated).toBe(witnessBaseline);
    expect(records.map((r) => r.allocated)).toEqual(witnessBytes);
    expect(records.every((r) => r.active === r.allocated && r.reserved === r.allocated)).toBe(true);
    expect(tracker.stats().reservedSource).toMatch(/^allocated \(cpu reports no pool/);
  });

  it('summary: operators ordered by total added, numbers equal to the recorded deltas', () => {
    const { tracker } = traced();
    const stats = tracker.stats();
    const deltas = recordDeltas(stats);
    const summary = tracker.summary(1000);
    expect(summary.numRecords).toBe(stats.records.length);
    expect(summary.top).toHaveLength(summary.numOperators);
    for (let i = 1; i < summary.top.length; i++) expect(summary.top[i - 1]!.totalBytes).toBeGreaterThanOrEqual(summary.top[i]!.totalBytes);
    let calls = 0;
    for (const row of summary.top) {
      const mine = stats.records.flatMap((r, i) => (operatorOf(r.name) === row.operator ? [{ name: r.name, delta: deltas[i]! }] : []));
      calls += mine.length;
      expect(row.calls).toBe(mine.length);
      expect(row.totalBytes).toBe(mine.reduce((a, m) => a + m.delta, 0));
      expect(row.maxDeltaBytes).toBe(Math.max(...mine.map((m) => m.delta)));
      expect(mine.find((m) => m.name === row.maxDeltaCall)!.delta).toBe(row.maxDeltaBytes);
    }
    expect(calls).toBe(stats.records.length);
    // BatchNorm's fused kernel makes exactly one [batch, units] float32 output per call, two steps.
    const bn = summary.top.find((r) => r.operator === 'net.bn.forward.FusedBatchNorm')!;
    expect(bn).toMatchObject({ calls: 2, maxDeltaBytes: BATCH * UNITS * 4, totalBytes: 2 * BATCH * UNITS * 4 });
    // The text form lists the same top rows.
    const text = tracker.summaryString(5);
    for (const row of summary.top.slice(0, 5)) expect(text).toContain(row.operator);
    expect(text.split('\n').filter((l) => /^\s*\d+\s{2}/.test(l))).toHaveLength(5);
  });

  it('save → load round-trips exactly; bad files fail with the file name and what was found', () => {
    const { tracker } = traced();
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-ops-'));
    const file = path.join(dir, 'stats.json');
    tracker.saveStats(file);
    const loaded = new MemoryTracker();
    loaded.load(file);
    expect(loaded.stats()).toEqual(tracker.stats());
    expect(loaded.statsJson()).toBe(readFileSync(file, 'utf8'));
    expect(loaded.summaryString()).toBe(tracker.summaryString());
    expect(loaded.device).toBe('cpu');

    const original = JSON.parse(readFileSync(file, 'utf8'));
    const cases: [string, string, RegExp][] = [
      ['newer.json', JSON.stringify({ ...original, version: 2 }), /newer\.json: written by a newer memscope \(format "memscope\.op-traces" version 2\); this memscope reads version 1/],
      ['foreign.json', JSON.stringify({ segments: [], device_traces: [] }), /foreign\.json: not a memscope operator-trace stats file: format is missing/],
      ['other-format.json', JSON.stringify({ format: 'memscope.capture', version: 1 }), /other-format\.json: .*format is "memscope\.capture"/],
      ['truncated.json', readFileSync(file, 'utf8').slice(0, 500), /truncated\.json: not valid JSON \(truncated or corrupt/],
      ['empty.json', '', /empty\.json: not valid JSON \(empty file/],
      [
        'bad-field.json',
        JSON.stringify({ ...original, records: original.records.map((r: object, i: number) => (i === 3 ? { ...r, allocated: -5 } : r)) }),
        /bad-field\.json: records\[3\]\.allocated must be a non-negative integer, found -5/,
      ],
      [
        'bad-marker.json',
        JSON.stringify({ ...original, markers: [{ name: 'fw_start', index: 1e6, step: 0 }] }),
        /bad-marker\.json: markers\[0\]\.index 1000000 is past the \d+ records/,
      ],
    ];
    for (const [name, content, message] of cases) {
      const bad = path.join(dir, name);
      writeFileSync(bad, content);
      const victim = new MemoryTracker();
      let error: unknown;
      try {
        victim.load(bad);
      } catch (err) {
        error = err;
      }
      expect(error, name).toBeInstanceOf(MemscopeError);
      expect((error as Error).message, name).toMatch(message);
      expect((error as Error).message, name).toContain(bad);
    }
    expect(() => new MemoryTracker().load(path.join(dir, 'missing.json'))).toThrow(/cannot read .*missing\.json: no such file/);
  });

  it('showTraces writes well-formed SVGs with the three series and every marker, and an HTML page holding them', async () => {
    const { tracker } = traced();
    const dir = path.join(process.cwd(), 'test-artifacts', 'op-traces-cpu');
    const written = tracker.showTraces(dir);
    expect(written.svgs.map((f) => path.basename(f))).toEqual(['memory_traces.svg', 'allocated_memory.svg', 'active_memory.svg', 'reserved_memory.svg']);
    const expectedSeries = [['allocated_memory', 'active_memory', 'reserved_memory'], ['allocated_memory'], ['active_memory'], ['reserved_memory']];
    const markerXs = tracker.markers.map((m) => String(m.index));
    written.svgs.forEach((file, i) => {
      const root = parseXml(readFileSync(file, 'utf8'));
      const els = allElements(root);
      // (Drawn in z order; reserved first, so the others sit on top of it.)
      expect(els.filter((e) => e.attrs.class === 'series').map((e) => e.attrs['data-label']).sort()).toEqual([...expectedSeries[i]!].sort());
      expect(els.filter((e) => e.attrs.class === 'legend-item').slice(0, expectedSeries[i]!.length).map((e) => e.children[1]!.text)).toEqual(expectedSeries[i]);
      const markers = els.filter((e) => e.attrs.class === 'marker');
      expect(markers.map((e) => e.attrs['data-x'])).toEqual(markerXs);
      expect(markers.map((e) => e.attrs['data-label'])).toEqual([
        'fw_start (step 0)',
        'fw_bw_boundary (step 0)',
        'fw_start (step 1)',
        'fw_bw_boundary (step 1)',
      ]);
      // Axis labels and title are there to read.
      const texts = els.filter((e) => e.name === 'text').map((e) => e.text);
      expect(texts).toContain('# Operator Calls');
      expect(texts).toContain('Memory (MiB)');
    });
    const html = readFileSync(written.html, 'utf8');
    expect(html.match(/<svg /g)).toHaveLength(4);
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
    expect(html).toContain('(no layer).optimizer.');

    // A real XML parser (Chromium's) agrees, and the page renders; the PNG is for a human to look at.
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
      const svgs = written.svgs.map((f) => readFileSync(f, 'utf8'));
      const errors = await page.evaluate(
        (docs) => docs.map((d) => new DOMParser().parseFromString(d, 'image/svg+xml').getElementsByTagName('parsererror').length),
        svgs,
      );
      expect(errors).toEqual([0, 0, 0, 0]);
      await page.goto(`file://${written.html}`);
      const box = await page.locator('#memory_traces svg').boundingBox();
      expect(box!.width).toBeGreaterThan(500);
      await page.screenshot({ path: path.join(process.cwd(), 'test-artifacts', 'op-traces-cpu.png'), fullPage: true });
    } finally {
      await browser.close();
    }
  });

  it('model.fit under track(): one marker pair per batch step, the compiled optimizer found, names from the layers', async () => {
    const model = buildNet();
    model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
    const { xs, ys } = data();
    const tracker = new MemoryTracker();
    await tracker.track(model, () => model.fit(xs, ys, { epochs: 2, batchSize: BATCH, verbose: 0 }));
    expect(tracker.markers.map((m) => `${m.name}@${m.step}`)).toEqual(['fw_start@0', 'fw_bw_boundary@0', 'fw_start@1', 'fw_bw_boundary@1']);
    const names = tracker.records.map((r) => r.name);
    expect(names.some((n) => n.startsWith('net.bn.forward.'))).toBe(true);
    expect(names.some((n) => n.startsWith('net.inner.inner_dense.backward.'))).toBe(true);
    // SGD's update of each weight, found without naming the optimizer.
    expect(names.some((n) => n.startsWith('(no layer).optimizer.'))).toBe(true);
    expect(tracker.monitoring).toBe(false);
    model.dispose();
    xs.dispose();
    ys.dispose();
  });

  it('a tracker that never ran says so in its summary, with no blank device or reserved labels', () => {
    const text = new MemoryTracker().summaryString(3);
    expect(text).toContain('No operator calls recorded (the tracker has not run).');
    expect(text).not.toMatch(/Device :|Reserved memory: \n/);
  });

  it('a tensor made before monitoring and first read by a kernel counts from the start, not as that kernel\'s memory added', () => {
    const model = tfl.sequential({ layers: [tfl.layers.dense({ inputShape: [4], units: 2 })] });
    const big = tf.zeros([1000]); // 4,000 B, which PyTorch's memory_allocated() would count from the start
    const ops = new MemoryTracker();
    ops.startMonitor(model);
    const y = tf.tidy(() => tf.add(tf.slice(big, [0], [10]), 1));
    ops.stop();
    const stats = JSON.parse(ops.statsJson()) as { baseline: { allocated: number }; records: { name: string; allocated: number }[] };
    expect(stats.baseline.allocated).toBeGreaterThanOrEqual(4000);
    const deltas = recordDeltas(stats as never);
    // Slice allocates its 40-byte output; Add its 40 bytes (the slice is freed only at the tidy's end).
    expect(stats.records.map((r, i) => [operatorOf(r.name), deltas[i]])).toEqual([
      ['(no layer).none.Slice', 40],
      ['(no layer).none.Add', 44],
    ]);
    tf.dispose([y, big]);
    model.dispose();
  });
});
