import { describe, it, expect } from 'vitest';
import { parseCapture } from '../../src/capture/reader.js';
import { findLeaks } from '../../src/capture/leaks.js';
import { formatLeaks } from '../../src/capture/leaks-text.js';

// A capture as `memscope run --stacks` writes it for an async inference loop that keeps every
// prediction: one 128-byte output a step, allocated at the same line of the program. The library
// frames under that line are folded into "[N frames in …]" runs, and N is not the same every
// step (how many timer and promise frames the runtime shows depends on what else was due).
function asyncLoopCapture(foldedCounts: readonly number[]): string {
  const lines: unknown[] = [
    { format: 'memscope-capture', version: 1, clock: 'ms', created: '2026-01-01T00:00:00.000Z', argv: ['serve.mjs'], backend: null, stacks: true, maxEntries: null },
    ['s', 1, 'Activation'],
    ['s', 2, 'forward'],
    ['s', 3, 'cpu'],
    ['s', 4, '_FusedMatMul'],
    ['s', 5, 'predict'],
    ['s', 6, 'serve (serve.mjs:15:21)'],
    ['s', 7, 'async serve.mjs:22:26'],
  ];
  // As the writer does: one string and one stack record per distinct stack.
  const stackOfCount = new Map<number, number>();
  let seq = 0;
  let t = 1;
  foldedCounts.forEach((n) => {
    let stack = stackOfCount.get(n);
    if (stack === undefined) {
      stack = stackOfCount.size + 1;
      stackOfCount.set(n, stack);
      lines.push(['s', 7 + stack, `[${n} frames in memscope, @tensorflow/tfjs-core, node, @tensorflow/tfjs-layers]`]);
      lines.push(['k', stack, [7 + stack, 6, 7]]);
    }
    lines.push(['a', t++, seq, 3, 128, 1, 0, 2, 4, 0, 0]);
    lines.push(['t', seq, stack]);
    seq++;
    lines.push(['m', t++, 5]);
  });
  lines.push(['e', t, { events: seq, dropped: 0, exitCode: 0, error: null }]);
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

describe('leak groups', () => {
  it('one group per program line: stacks that differ only in how many library frames were folded are one site', () => {
    const same = findLeaks(parseCapture(asyncLoopCapture([57, 57, 57, 57, 57, 57])));
    expect(same.groups).toHaveLength(1);
    expect(same.groups[0]!.perStep.map((s) => s.step)).toEqual([1, 2, 3, 4, 5, 6]);

    const report = findLeaks(parseCapture(asyncLoopCapture([57, 57, 58, 57, 57, 57])));
    expect(report.groups).toHaveLength(1);
    expect(report.groups[0]!.userFrame).toBe('serve (serve.mjs:15:21)');
    expect(report.groups[0]!.perStep.map((s) => s.step)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(report.groups[0]!.count).toBe(6);
  });
});

/**
 * A capture of `steps` step() marks in which the program keeps one 256-byte tensor, made at one line,
 * at each of the steps `kept` (0-based) and never frees it; every step also makes and frees a
 * temporary at another line.
 */
function keptAtSteps(steps: number, kept: readonly number[]): string {
  const lines: unknown[] = [
    { format: 'memscope-capture', version: 1, clock: 'ms', created: '2026-01-01T00:00:00.000Z', argv: ['fit.mjs'], backend: null, stacks: true, maxEntries: null },
    ['s', 1, 'Activation'],
    ['s', 2, 'forward'],
    ['s', 3, 'cpu'],
    ['s', 4, 'Mean'],
    ['s', 5, 'step'],
    ['s', 6, 'onEpochEnd (fit.mjs:30:12)'],
    ['s', 7, 'trainBatch (fit.mjs:18:5)'],
    ['k', 1, [6]],
    ['k', 2, [7]],
  ];
  let seq = 0;
  let t = 1;
  for (let s = 0; s < steps; s++) {
    const tmp = seq++;
    lines.push(['a', t++, tmp, 3, 1024, 1, 0, 2, 4, 0, s]);
    lines.push(['t', tmp, 2]);
    lines.push(['f', t++, tmp]);
    if (kept.includes(s)) {
      lines.push(['a', t++, seq, 3, 256, 1, 0, 2, 4, 0, s]);
      lines.push(['t', seq++, 1]);
    }
    lines.push(['m', t++, 5]);
  }
  lines.push(['e', t, { events: seq, dropped: 0, exitCode: 0, error: null }]);
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

describe('leaks that grow once every few steps', () => {
  it('one tensor kept per epoch of four batches is a leak, at its line', () => {
    // 8 epochs of 4 steps: the kept tensor grows the group in 7 of 31 transitions, under half.
    const report = findLeaks(parseCapture(keptAtSteps(32, [3, 7, 11, 15, 19, 23, 27, 31])));
    expect(report.groups.map((g) => [g.userFrame, g.count])).toEqual([['onEpochEnd (fit.mjs:30:12)', 8]]);
  });

  it('a cache filled in the first steps and then left alone is not', () => {
    expect(findLeaks(parseCapture(keptAtSteps(32, [0, 1, 2, 3]))).groups).toEqual([]);
    // Nor two tensors kept in the middle of a long run.
    expect(findLeaks(parseCapture(keptAtSteps(32, [10, 20]))).groups).toEqual([]);
  });
});

describe('the leaks text for a long run', () => {
  it('lists the first and last five steps and sums the steps between in one row', () => {
    const report = findLeaks(parseCapture(asyncLoopCapture(Array.from({ length: 40 }, () => 57))));
    const steps = report.groups[0]!.perStep;
    expect(steps.length).toBeGreaterThan(30);
    const text = formatLeaks(report, { stacksRecorded: true });
    const rows = text.split('\n').filter((l) => /^\s+│/.test(l)).slice(1); // the header row first
    expect(rows).toHaveLength(11);
    const stepCell = (row: string) => row.split('│')[1]!.trim();
    expect(rows.slice(0, 5).map(stepCell)).toEqual(steps.slice(0, 5).map((s) => String(s.step)));
    expect(rows.slice(6).map(stepCell)).toEqual(steps.slice(-5).map((s) => String(s.step)));
    const middle = steps.slice(5, -5);
    expect(stepCell(rows[5]!)).toBe(`… ${middle.length} steps (${middle[0]!.step}–${middle.at(-1)!.step})`);
    expect(rows[5]!.split('│')[2]!.trim()).toBe(String(middle.reduce((n, s) => n + s.count, 0)));
    // A run of a few steps is listed whole.
    const short = findLeaks(parseCapture(asyncLoopCapture([57, 57, 57, 57, 57, 57])));
    expect(formatLeaks(short).split('\n').filter((l) => /^\s+│/.test(l))).toHaveLength(1 + short.groups[0]!.perStep.length);
  });
});

/**
 * A capture without stacks of `steps` step() marks: each step keeps one 64-byte Multiply tensor
 * (never freed), and a `scalarBytes` Multiply storage of the same layer and phase — a framework's
 * bookkeeping — is made in step 0 and freed in step 15.
 */
function leakBesideScalar(steps: number, scalarBytes: number): string {
  const lines: unknown[] = [
    { format: 'memscope-capture', version: 1, clock: 'ms', created: '2026-01-01T00:00:00.000Z', argv: ['page'], backend: null, stacks: false, maxEntries: null },
    ['s', 1, 'Activation'],
    ['s', 2, 'none'],
    ['s', 3, 'webgl'],
    ['s', 4, 'Multiply'],
    ['s', 5, 'predict'],
  ];
  let seq = 0;
  let t = 1;
  for (let s = 0; s < steps; s++) {
    if (s === 0) lines.push(['a', t++, seq++, 3, scalarBytes, 1, 0, 2, 4, 0, s]);
    if (s === 15) lines.push(['f', t++, 0]);
    lines.push(['a', t++, seq++, 3, 64, 1, 0, 2, 4, 0, s]);
    lines.push(['m', t++, 5]);
  }
  lines.push(['e', t, { events: seq, dropped: 0, exitCode: 0, error: null }]);
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

describe('a leak grouped without stacks beside a framework scalar freed mid-run', () => {
  it('one small free among thirty steps of growth does not hide the leak', () => {
    const report = findLeaks(parseCapture(leakBesideScalar(30, 4)));
    expect(report.groups.map((g) => [g.kernel, g.count, g.bytes])).toEqual([['Multiply', 30, 30 * 64]]);
  });

  it('a free of more than a twentieth of what the group grew still makes it no leak', () => {
    expect(findLeaks(parseCapture(leakBesideScalar(30, 4096))).groups).toEqual([]);
  });
});
