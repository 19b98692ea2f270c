import { describe, it, expect } from 'vitest';
import type { EventContext, ModuleRef, OptimizerRef, StorageRef, TensorRef } from '../../src/core/events.js';
import { CaptureRecorder } from '../../src/capture/recorder.js';
import { CaptureWriter } from '../../src/capture/writer.js';
import { parseCapture } from '../../src/capture/reader.js';
import { findLeaks } from '../../src/capture/leaks.js';
import { formatLeaks } from '../../src/capture/leaks-text.js';
import { foldFrames } from '../../src/capture/recorder.js';

/** A hand-driven event stream: the recorder's contract is the event sink, not TFJS. */
function harness(opts: { maxEntries?: number; stacks?: boolean } = {}) {
  let text = '';
  let clock = 0;
  const writer = new CaptureWriter({ write: (c) => (text += c) }, { created: 'x', argv: ['train.js'], backend: null, stacks: !!opts.stacks, maxEntries: opts.maxEntries ?? null });
  const rec = new CaptureRecorder(writer, { ...opts, now: () => clock });
  let nextId = 1;
  const ctx: { phase: EventContext['phase']; module: ModuleRef | null; kernel: string | null; step: number; seq: number } = {
    phase: 'none', module: null, kernel: null, step: 0, seq: 0,
  };
  const alloc = (bytes: number): StorageRef => {
    const s: StorageRef = { id: nextId++, device: 'cpu', bytes, dtype: 'float32', shape: [bytes / 4] };
    clock += 1;
    rec.onStorageAlloc(s, ctx);
    return s;
  };
  const free = (s: StorageRef): void => {
    clock += 1;
    rec.onStorageFree(s, ctx);
  };
  /** A tensor on `s`; with `trainable` given, a variable (a weight when true). */
  const tensor = (s: StorageRef, trainable?: boolean): TensorRef =>
    trainable === undefined
      ? { id: s.id, storage: s, dtype: 'float32', shape: s.shape }
      : { id: s.id, storage: s, dtype: 'float32', shape: s.shape, trainable, variableName: `v${s.id}` };
  return { rec, writer, ctx, alloc, free, tensor, text: () => text };
}

function fakeModule(path: string, weights: TensorRef[]): ModuleRef {
  return { id: 1, path, className: 'Dense', parent: null, children: [], parameters: () => weights, buffers: () => [] };
}

/** Trains a one-layer "model" for `steps` steps; with `leak`, each step keeps one 400-byte tensor alive. */
function train(steps: number, leak: boolean, kept: StorageRef[] = []) {
  const h = harness();
  const kernel = h.alloc(64);
  const dense = fakeModule('model.dense_1', [h.tensor(kernel, true)]);
  const moment = h.alloc(64);
  const opt: OptimizerRef = { id: 1, className: 'AdamOptimizer', stateVariables: () => [h.tensor(moment)] };
  const data = h.alloc(1000); // made once before training: not a leak
  for (let i = 0; i < steps; i++) {
    h.ctx.phase = 'forward';
    h.ctx.module = dense;
    h.rec.onModuleEnter(dense, [], h.ctx);
    h.ctx.kernel = 'MatMul';
    const act = h.alloc(128);
    h.ctx.kernel = null;
    h.rec.onModuleExit(dense, [], h.ctx);
    h.ctx.module = null;
    h.ctx.phase = 'backward';
    const grad = h.alloc(64);
    h.rec.onGradientEnd([{ x: h.tensor(kernel, true), grad: h.tensor(grad) }], h.ctx);
    h.free(act);
    h.ctx.phase = 'optimizer';
    h.rec.onOptimizerStepStart(opt, h.ctx);
    h.free(grad);
    h.rec.onOptimizerStepEnd(opt, h.ctx);
    h.ctx.phase = 'none';
    if (leak) {
      h.ctx.kernel = 'Add';
      kept.push(h.alloc(400));
      h.ctx.kernel = null;
    }
  }
  void data;
  return h;
}

describe('capture format', () => {
  it("a composite kernel (a customGrad scope) is not in the kernel table: its inner kernel's bytes are counted once", () => {
    const h = harness();
    const composite = { name: 'fusedMatMul__op', inputs: [], outputs: [], composite: true };
    const inner = { name: '_FusedMatMul', inputs: [], outputs: [], composite: false };
    h.rec.onKernelStart(composite, h.ctx);
    h.rec.onKernelStart(inner, h.ctx);
    h.ctx.kernel = '_FusedMatMul';
    h.alloc(256);
    h.ctx.kernel = null;
    h.rec.onKernelEnd(inner, h.ctx);
    h.rec.onKernelEnd(composite, h.ctx);
    h.rec.finish({ exitCode: 0, error: null });
    expect(parseCapture(h.text()).kernels).toEqual([{ name: '_FusedMatMul', calls: 1, bytesAllocated: 256, bytesRetained: 256, peakAdded: 256 }]);
  });

  it("a page's capture (startCapture) names the page and its own options in advice, not memscope run's", async () => {
    const { captureToReport } = await import('../../src/viewer/report-data.js');
    const lines: unknown[] = [
      { format: 'memscope-capture', version: 1, clock: 'ms', created: 'x', argv: ['http://localhost:8080/app.html'], backend: null, stacks: false, maxEntries: 4, recorder: 'browser' },
      ['s', 1, 'webgl'],
      ['s', 2, 'Activation'],
      ['s', 3, 'predict'],
    ];
    for (let step = 0; step < 4; step++) {
      lines.push(['a', step, step, 1, 64, 2, 0, 0, 0, 0, step]);
      lines.push(['m', step + 0.5, 3]);
    }
    lines.push(['e', 9, { events: 8, dropped: 3, exitCode: null, error: null }]);
    const cap = parseCapture(lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const report = findLeaks(cap);
    expect(report.coverage).toMatch(/past the capture's startCapture's maxEntries 4 were not recorded/);
    expect(formatLeaks(report, { stacksRecorded: false, stacksOption: 'startCapture({ stacks: true })' })).toContain("(record with startCapture({ stacks: true }) for the program's line)");
    const data = captureToReport(cap, 'page.capture.ndjson');
    expect(data.source.detail).toBe('startCapture in http://localhost:8080/app.html · x');
    // The report counts the step ends the verdict compared, as `memscope leaks` does: here, inference calls only.
    expect([data.leakSteps, report.steps, data.steps.length]).toEqual([4, 4, 0]);
    expect(data.notices.join('\n')).toContain('Recorded without startCapture({ stacks: true })');
    expect(data.notices.join('\n')).not.toMatch(/--stacks|--max-entries|memscope run/);
  });

  it('round-trips allocations, categories, steps, modules and kernels', () => {
    const h = train(4, false);
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.truncated).toBeNull();
    expect(cap.end).toMatchObject({ exitCode: 0, error: null, dropped: 0 });
    expect(cap.steps.map((s) => s.step)).toEqual([1, 2, 3, 4]);
    // The kernel storage became a Parameter when the module first ran; the moment Optstate; grads Gradient.
    const byCat = (c: string) => cap.allocs.toArray().filter((a) => a.category === c).map((a) => a.bytes);
    expect(byCat('Parameter')).toEqual([64]);
    expect(byCat('Optstate')).toEqual([64]);
    expect(byCat('Gradient')).toEqual([64, 64, 64, 64]);
    expect(cap.allocs.toArray().filter((a) => a.kernel === 'MatMul').every((a) => a.layer === 'model.dense_1' && a.phase === 'forward')).toBe(true);
    expect(cap.modules.map((m) => m.path)).toEqual(['model.dense_1']);
    expect(cap.modules[0].states?.parameterBytes).toBe(64);
    expect(cap.modules[0].states?.localPeakForward).toEqual({ cpu: 64 + 64 + 1000 + 128 });
    // Live totals at the step end: weights, moment, the data tensor.
    expect(cap.steps[3].live).toEqual({ cpu: { Parameter: 64, Optstate: 64, Activation: 1000 } });
    expect(cap.kernels).toEqual([]); // no kernel events were sent
    expect(cap.eventCount).toBe(3 + 4 * 4);
  });

  it('reads a capture cut mid-record and says where', () => {
    const h = train(3, false);
    h.writer.flush();
    const full = h.text();
    const cut = full.slice(0, full.lastIndexOf('\n', full.length - 2) + 10);
    const cap = parseCapture(cut);
    expect(cap.truncated?.reason).toMatch(/cut off mid-write/);
    expect(cap.truncated?.line).toBe(cut.split('\n').length);
    expect(cap.steps.length).toBeGreaterThan(0);
    // Cut exactly at a record boundary: nothing is broken, but no end record either.
    const atBoundary = parseCapture(full);
    expect(atBoundary.truncated?.reason).toMatch(/no end record/);
  });

  it('rejects damage that is not at the tail, naming the line', () => {
    const h = train(2, false);
    h.rec.finish({ exitCode: 0, error: null });
    const lines = h.text().split('\n');
    lines[3] = '["a",1,2';
    expect(() => parseCapture(lines.join('\n'), 'x.ndjson')).toThrow(/x\.ndjson: line 4 is not a JSON record/);
    expect(() => parseCapture('{"a":1}\n', 'c.ndjson')).toThrow('c.ndjson: line 1 is not a memscope capture header (no "format" field, not "memscope-capture")');
    expect(() => parseCapture('{"format":"other"}\n', 'c.ndjson')).toThrow('c.ndjson: line 1 is not a memscope capture header (its "format" is "other", not "memscope-capture")');
    expect(() => parseCapture('hello\n')).toThrow(/not a memscope capture header/);
  });

  it('a weight\'s old storage still alive after assign is no longer Parameter', () => {
    const h = harness();
    const oldKernel = h.alloc(64);
    const dense = fakeModule('model.dense_1', [h.tensor(oldKernel, true)]);
    h.rec.onModuleEnter(dense, [], h.ctx);
    h.rec.onModuleExit(dense, [], h.ctx);
    h.ctx.phase = 'optimizer';
    const newKernel = h.alloc(64);
    // The old storage is not freed: a leaked clone still holds it.
    h.rec.onVariableAssign({ ...h.tensor(newKernel, true), variableName: 'dense_1/kernel' }, oldKernel, h.ctx);
    h.rec.onOptimizerStepEnd({ id: 1, className: 'SGD', stateVariables: () => [] }, h.ctx);
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.steps[0].live).toEqual({ cpu: { Parameter: 64, Activation: 64 } });
    expect(cap.allocs.toArray().map((a) => a.category)).toEqual(['Activation', 'Parameter']);
  });

  it('a gradient is Gradient when taken with respect to a variable, and stays Temp for any other tensor', () => {
    const h = harness();
    const weight = h.alloc(64);
    const input = h.alloc(32);
    h.ctx.phase = 'backward';
    const weightGrad = h.alloc(64);
    const inputGrad = h.alloc(32);
    h.rec.onGradientEnd(
      [
        { x: h.tensor(weight, true), grad: h.tensor(weightGrad) },
        { x: h.tensor(input), grad: h.tensor(inputGrad) },
      ],
      h.ctx,
    );
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.allocs.toArray().map((x) => [x.bytes, x.category])).toEqual([
      [64, 'Activation'],
      [32, 'Activation'],
      [64, 'Gradient'],
      [32, 'Temp'],
    ]);
  });

  it('a variable keeps the category it was given across assign, even when its previous storage was not known', () => {
    const h = harness();
    const moment = h.alloc(16);
    const opt: OptimizerRef = { id: 1, className: 'AdamOptimizer', stateVariables: () => [h.tensor(moment, false)] };
    h.ctx.phase = 'optimizer';
    h.rec.onOptimizerStepStart(opt, h.ctx);
    h.rec.onOptimizerStepEnd(opt, h.ctx);
    h.ctx.phase = 'none';
    // The moment's next storage, made outside the step, from a previous storage the recorder never saw.
    const next = h.alloc(16);
    const unseen: StorageRef = { id: 999, device: 'cpu', bytes: 16, dtype: 'float32', shape: [4] };
    h.rec.onVariableAssign({ ...h.tensor(next, false), id: moment.id }, unseen, h.ctx);
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.allocs.toArray().map((x) => [x.bytes, x.category])).toEqual([
      [16, 'Optstate'],
      [16, 'Optstate'],
    ]);
  });

  it('--max-entries keeps frees of written allocations and counts the rest', () => {
    const h = harness({ maxEntries: 2 });
    const a = h.alloc(4);
    const b = h.alloc(8);
    h.alloc(16);
    h.free(a);
    h.free(b);
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.allocs.toArray().map((x) => [x.bytes, x.freeT !== null])).toEqual([[4, true], [8, true]]);
    expect(cap.end).toMatchObject({ events: 3, dropped: 1 });
  });
});

describe('leak detection', () => {
  it('finds a tensor kept alive every step, grouped by kernel, with counts per step', () => {
    const h = train(5, true);
    h.rec.finish({ exitCode: 0, error: null });
    const report = findLeaks(parseCapture(h.text()));
    expect(report.groups).toHaveLength(1);
    const g = report.groups[0];
    expect(g.kernel).toBe('Add');
    // Made after the optimizer step of steps 1..5, so each belongs to the next step (2..5, and 6:
    // after the last step end). Those of steps 2–4 outlive a later step end and make the verdict;
    // step 5's and the one after the last step end come from the same site and are counted with it.
    expect(g.perStep).toEqual([
      { step: 2, count: 1, bytes: 400 },
      { step: 3, count: 1, bytes: 400 },
      { step: 4, count: 1, bytes: 400 },
      { step: 5, count: 1, bytes: 400 },
      { step: 6, count: 1, bytes: 400 },
    ]);
    expect([g.count, g.bytes]).toEqual([5, 2000]);
    expect(g.liveAtStepEnd).toEqual([0, 400, 800, 1200, 1600]);
    expect(formatLeaks(report)).toMatch(/│ after 5 │ +1 │ 400 B │ +— │/);
  });

  it('reports nothing for a clean loop, and says when there are too few steps', () => {
    const clean = train(5, false);
    clean.rec.finish({ exitCode: 0, error: null });
    expect(findLeaks(parseCapture(clean.text())).groups).toEqual([]);
    const short = train(2, true);
    short.rec.finish({ exitCode: 0, error: null });
    const r = findLeaks(parseCapture(short.text()));
    expect(r.groups).toEqual([]);
    expect(r.note).toMatch(/at least 3 completed steps/);
  });
});

describe('leak judgement', () => {
  it('memory that grows across steps but is released before the program ends is not a leak', () => {
    const kept: StorageRef[] = [];
    const h = train(5, true, kept);
    // What a framework holds for its own bookkeeping during a loop (fit's per-epoch sums) and frees at the end.
    for (const s of kept) h.free(s);
    h.rec.finish({ exitCode: 0, error: null });
    const report = findLeaks(parseCapture(h.text()));
    expect(report.note).toBeNull();
    expect(report.groups).toEqual([]);
  });

  it('inference marks are steps: outputs kept across marks are a leak; a mark inside an optimizer step is ignored', () => {
    const h = harness();
    h.ctx.kernel = 'MatMul';
    for (let i = 0; i < 4; i++) {
      h.alloc(32); // the kept output
      h.free(h.alloc(64)); // a temporary
      h.rec.mark('predict');
    }
    h.rec.onOptimizerStepStart({ id: 1, className: 'SGD', stateVariables: () => [] }, h.ctx);
    h.rec.mark('predict');
    h.free(h.alloc(4));
    h.rec.onOptimizerStepEnd({ id: 1, className: 'SGD', stateVariables: () => [] }, h.ctx);
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    expect(cap.marks.map((m) => m.kind)).toEqual(['predict', 'predict', 'predict', 'predict']);
    const report = findLeaks(cap);
    expect(report).toMatchObject({ steps: 5, stepKind: 'mixed' });
    expect(report.groups.map((g) => [g.kernel, g.count, g.bytes])).toEqual([['MatMul', 4, 128]]);
    expect(report.groups[0].perStep.map((r) => r.step)).toEqual([1, 2, 3, 4]);
  });
});

describe('stacks', () => {
  function allocateHere(h: ReturnType<typeof harness>, bytes: number): StorageRef {
    return h.alloc(bytes);
  }

  it('are written only for storages that outlive the step after their own, keyed by location', () => {
    const h = harness({ stacks: true });
    const kept: StorageRef[] = [];
    for (let i = 0; i < 4; i++) {
      kept.push(allocateHere(h, 16));
      h.free(allocateHere(h, 8));
      h.rec.mark('step');
    }
    h.rec.finish({ exitCode: 0, error: null });
    const cap = parseCapture(h.text());
    const withStack = cap.allocs.toArray().filter((a) => a.stack !== 0);
    expect(withStack.map((a) => a.bytes)).toEqual([16, 16, 16, 16]);
    // One call site, one stack: the four kept storages share it.
    expect(new Set(withStack.map((a) => a.stack)).size).toBe(1);
    const frames = cap.stacks.get(withStack[0].stack)!;
    expect(frames.some((f) => f.startsWith('allocateHere ') && f.includes('capture.test.ts:'))).toBe(true);
    // Records: 8 allocs + 4 frees + 4 marks + the end; stacks only for the 4 survivors.
    expect(h.text().split('\n').filter((l) => l.startsWith('["t",')).length).toBe(4);
  });

  it('fold runs of library frames into one entry naming the packages', () => {
    const site = (file: string | null, fn: string | null, line = 1): NodeJS.CallSite =>
      ({
        getFileName: () => file,
        getLineNumber: () => line,
        getColumnNumber: () => 5,
        getFunctionName: () => fn,
        getTypeName: () => null,
        getMethodName: () => null,
        isToplevel: () => fn === null,
        isConstructor: () => false,
        isAsync: () => false,
        isNative: () => false,
      }) as unknown as NodeJS.CallSite;
    const frames = foldFrames(
      [
        site('/app/node_modules/memscope/dist/tfjs/installation.js', 'wrapped'),
        site('/app/node_modules/@tensorflow/tfjs-core/dist/tf-core.node.js', 'runKernel'),
        site('node:internal/modules/cjs/loader', 'load'),
        site('file:///app/serve.mjs', 'serve', 12),
        site('/app/node_modules/@tensorflow/tfjs-layers/dist/tf-layers.node.js', 'predict'),
        site('/app/main.js', null, 3),
      ],
      ['/app/node_modules/memscope/dist/'],
    );
    expect(frames).toEqual([
      '[3 frames in memscope, @tensorflow/tfjs-core, node]',
      'serve (/app/serve.mjs:12:5)',
      '[1 frame in @tensorflow/tfjs-layers]',
      '/app/main.js:3:5',
    ]);
  });
});
