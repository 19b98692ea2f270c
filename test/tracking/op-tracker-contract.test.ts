// MemoryTracker against a scripted adapter: exact expected numbers for naming,
// nesting, markers, the reserved figure per source, and the lifecycle.
import { describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import type { ReservedMemorySource } from '../../src/core/adapter.js';
import { MemoryTracker } from '../../src/tracking/op-tracker.js';
import { parseXml } from '../support/xml-wellformed.js';
import { FakeFramework } from './fake-adapter.js';

function scenario(fw: FakeFramework) {
  const root = fw.module('model');
  const dense = fw.module('model.dense', root);
  const bn = fw.module('model.bn', root);
  return { root, dense, bn };
}

/** One training step: forward through dense and bn, a loss outside layers, backward, optimizer. */
function trainStep(fw: FakeFramework, m: ReturnType<typeof scenario>) {
  fw.enter(m.root);
  // TFJS clones a kernel's inputs for backward by running Identity inside it.
  fw.kernel('MatMul', { module: m.dense }, () => {
    fw.alloc(400);
    fw.kernel('Identity', { module: m.dense });
  });
  // A kernel that threw is not an operator call.
  fw.kernel('Reshape', { module: m.dense, throws: true });
  // A composite whose inner kernels allocate a temporary and free it before it ends.
  fw.kernel('fusedBatchNorm', { module: m.bn, composite: true }, () => {
    const tmp = { s: null as ReturnType<FakeFramework['alloc']> | null };
    fw.kernel('Sub', { module: m.bn }, () => (tmp.s = fw.alloc(100)));
    fw.kernel('Mul', { module: m.bn }, () => fw.alloc(100));
    fw.free(tmp.s!);
  });
  fw.kernel('fusedMatMul__op', { module: m.dense, composite: true });
  fw.exit(m.root);
  fw.kernel('Mean', { phase: 'forward' }, () => fw.alloc(4));
  fw.kernel('MatMul', { module: m.dense, phase: 'backward' }, () => fw.alloc(800));
  fw.kernel('Mul', { phase: 'optimizer' });
  fw.step();
}

describe('MemoryTracker on a scripted adapter', () => {
  it('names top-level kernels <layer>.<phase>.<Kernel>_<n> and skips nested kernels and kernels that threw', () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    fw.alloc(1000); // alive before monitoring: the baseline
    const t = new MemoryTracker(fw).startMonitor(m.root);
    trainStep(fw, m);
    trainStep(fw, m);
    t.stop();
    expect(t.records.map((r) => `${r.name} step=${r.step} alloc=${r.allocated}`)).toEqual([
      'model.dense.forward.MatMul_0 step=0 alloc=1400',
      'model.bn.forward.fusedBatchNorm_0 step=0 alloc=1500',
      'model.dense.forward.fusedMatMul_0 step=0 alloc=1500',
      '(no layer).forward.Mean_0 step=0 alloc=1504',
      'model.dense.backward.MatMul_1 step=0 alloc=2304',
      '(no layer).optimizer.Mul_0 step=0 alloc=2304',
      'model.dense.forward.MatMul_2 step=1 alloc=2704',
      'model.bn.forward.fusedBatchNorm_1 step=1 alloc=2804',
      'model.dense.forward.fusedMatMul_1 step=1 alloc=2804',
      '(no layer).forward.Mean_1 step=1 alloc=2808',
      'model.dense.backward.MatMul_3 step=1 alloc=3608',
      '(no layer).optimizer.Mul_1 step=1 alloc=3608',
    ]);
    expect(t.stats().baseline).toEqual({ allocated: 1000, active: 1000, reserved: 1000 });
    // Two steps, two of each marker, at the index of the next record.
    expect(t.markers).toEqual([
      { name: 'fw_start', index: 0, step: 0 },
      { name: 'fw_bw_boundary', index: 3, step: 0 },
      { name: 'fw_start', index: 6, step: 1 },
      { name: 'fw_bw_boundary', index: 9, step: 1 },
    ]);
    expect(fw.sinks.size).toBe(0);
  });

  it('counts only the traced device and rounds storages to its granularity', () => {
    const fw = new FakeFramework();
    fw.device = 'wasm';
    const m = scenario(fw);
    const t = new MemoryTracker(fw).startMonitor(m.root);
    fw.kernel('Add', { module: m.dense }, () => {
      fw.alloc(12); // wasm rounds to 8 B: 16
      fw.alloc(4096, 'cpu'); // another device: ignored
    });
    t.stop();
    expect(t.records[0]!.allocated).toBe(16);
    expect(t.device).toBe('wasm');
  });

  it('does not subtract a storage it never counted', () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    const t = new MemoryTracker(fw).startMonitor(m.root);
    const hidden = { id: 999, device: 'cpu', bytes: 64, dtype: 'float32', shape: [16] };
    fw.kernel('Dispose', { module: m.dense }, () => fw.free(hidden));
    t.stop();
    expect(t.records[0]!.allocated).toBe(0);
  });

  it('takes reserved from the device pool, else the allocator model, else allocated', () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    fw.pool = { reservedBytes: 65536, source: 'wasm heap' };
    const a = new MemoryTracker(fw).startMonitor(m.root);
    fw.kernel('Add', { module: m.dense }, () => fw.alloc(8));
    a.stop();
    expect(a.records[0]).toMatchObject({ allocated: 8, active: 8, reserved: 65536 });
    expect(a.stats().reservedSource).toBe('wasm heap');

    fw.pool = null;
    let reserved = 2048;
    let retries = 5;
    const model: ReservedMemorySource = {
      reservedBytes: () => reserved,
      numAllocRetries: () => retries,
      numOoms: () => 1,
    };
    const b = new MemoryTracker(fw, { reservedSource: model }).startMonitor(m.root);
    fw.kernel('Add', { module: m.dense }, () => fw.alloc(8));
    reserved = 4096;
    retries = 7;
    fw.kernel('Add', { module: m.dense }, () => fw.alloc(8));
    b.stop();
    expect(b.records.map((r) => r.reserved)).toEqual([2048, 4096]);
    // Counted over the session only.
    expect(b.summary()).toMatchObject({ numAllocRetries: 2, numOoms: 0 });

    const c = new MemoryTracker(fw).startMonitor(m.root);
    fw.kernel('Add', { module: m.dense }, () => fw.alloc(8));
    c.stop();
    const allocated = c.records[0]!.allocated;
    expect(c.records[0]!.reserved).toBe(allocated);
    expect(c.stats().reservedSource).toMatch(/^allocated/);
    expect(c.summary()).toMatchObject({ numAllocRetries: null, numOoms: null });
  });

  it('summary: per operator, total over calls and the largest single delta, ordered by total', () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    const t = new MemoryTracker(fw).startMonitor(m.root);
    trainStep(fw, m);
    trainStep(fw, m);
    t.stop();
    const s = t.summary(3);
    expect(s.numOperators).toBe(6);
    expect(s.top.map((r) => [r.operator, r.calls, r.totalBytes, r.maxDeltaBytes, r.maxDeltaCall])).toEqual([
      ['model.dense.backward.MatMul', 2, 1600, 800, 'model.dense.backward.MatMul_1'],
      ['model.dense.forward.MatMul', 2, 800, 400, 'model.dense.forward.MatMul_0'],
      ['model.bn.forward.fusedBatchNorm', 2, 200, 100, 'model.bn.forward.fusedBatchNorm_0'],
    ]);
    expect(s.peakAllocated).toBe(2608);
    expect(t.summaryString(3)).toMatchInlineSnapshot(`
      "------------------------------------------------
      Device cpu: 12 operator calls, 6 operators, peak allocated 2.55 KiB
      Reserved memory: allocated (cpu reports no pool and no allocator model is attached)
      Allocation retries: n/a (no allocator model attached); OOMs: n/a (no allocator model attached)
      Top 3 operators by memory added (total over their calls; largest single call):
      #  operator                         calls      total  total bytes  largest  largest bytes  largest call
      1  model.dense.backward.MatMul          2  +1.56 KiB      +1600 B   +800 B         +800 B  model.dense.backward.MatMul_1
      2  model.dense.forward.MatMul           2     +800 B       +800 B   +400 B         +400 B  model.dense.forward.MatMul_0
      3  model.bn.forward.fusedBatchNorm      2     +200 B       +200 B   +100 B         +100 B  model.bn.forward.fusedBatchNorm_0
      ------------------------------------------------"
    `);
    expect(() => t.summary(-1)).toThrow(MemscopeError);
  });

  it('renders hostile layer names as text in the SVGs and the HTML page', () => {
    const fw = new FakeFramework();
    const root = fw.module('<script>alert(1)</script>');
    const layer = fw.module('<script>alert(1)</script>.x"&\'y', root);
    const t = new MemoryTracker(fw).startMonitor(root);
    fw.enter(root);
    fw.kernel('Add', { module: layer }, () => fw.alloc(8));
    fw.exit(root);
    t.stop();
    const { charts, html } = t.renderTraces();
    expect(charts).toHaveLength(4);
    for (const c of charts) expect(parseXml(c.svg).name).toBe('svg');
    expect(html).not.toContain('<script');
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;.x&quot;&amp;&#39;y.forward.Add');
  });

  it('track(): stops after sync and async functions, also when they throw', async () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    const t = new MemoryTracker(fw);
    expect(t.track(m.root, () => 42)).toBe(42);
    expect(fw.sinks.size).toBe(0);
    expect(() =>
      t.track(m.root, () => {
        throw new Error('user bug');
      }),
    ).toThrow('user bug');
    expect(fw.sinks.size).toBe(0);
    const value = await t.track(m.root, async () => {
      await Promise.resolve();
      fw.kernel('Add', { module: m.dense }, () => fw.alloc(4));
      return 'done';
    });
    expect(value).toBe('done');
    expect(t.records.map((r) => r.name)).toEqual(['model.dense.forward.Add_0']);
    await expect(t.track(m.root, async () => Promise.reject(new Error('async bug')))).rejects.toThrow('async bug');
    expect(fw.sinks.size).toBe(0);
    expect(t.monitoring).toBe(false);
  });

  it('lifecycle misuse is a MemscopeError; dispose is idempotent; a restart clears old results', () => {
    const fw = new FakeFramework();
    const m = scenario(fw);
    const t = new MemoryTracker(fw);
    expect(() => t.stop()).toThrow(/not monitoring/);
    t.startMonitor(m.root);
    expect(() => t.startMonitor(m.root)).toThrow(/already monitoring/);
    expect(() => t.loadJson('{}')).toThrow(/while monitoring/);
    fw.kernel('Add', { module: m.dense }, () => fw.alloc(4));
    t[Symbol.dispose]();
    t[Symbol.dispose]();
    expect(fw.detachCount).toBe(1);
    expect(t.records).toHaveLength(1);
    {
      using again = t.startMonitor(m.root);
      expect(again.records).toHaveLength(0);
    }
    expect(fw.sinks.size).toBe(0);
  });
});

describe('MemoryTracker in a browser bundle', () => {
  it('bundles for the browser with no Node import; file methods there fail clearly', async () => {
    const { build } = await import('esbuild');
    const result = await build({
      entryPoints: ['src/tfjs/memory-tracker.ts'],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      external: ['@tensorflow/*'],
      logLevel: 'silent',
    });
    expect(result.errors).toEqual([]);
    expect(result.outputFiles[0]!.text).not.toMatch(/from\s*["']node:|require\(["']node:/);

    const fw = new FakeFramework();
    const t = new MemoryTracker(fw);
    const saved = globalThis.process;
    // What a browser has: no `process` at all.
    Object.defineProperty(globalThis, 'process', { value: undefined, configurable: true, writable: true });
    let error: unknown;
    try {
      t.saveStats('stats.json');
    } catch (err) {
      error = err;
    } finally {
      Object.defineProperty(globalThis, 'process', { value: saved, configurable: true, writable: true });
    }
    expect(error).toBeInstanceOf(MemscopeError);
    expect((error as Error).message).toMatch(/saveStats\(path\) uses the file system and needs Node\.js ≥ 20\.16; in a browser use statsJson\(\)/);
    // The string forms work anywhere.
    const copy = new MemoryTracker(fw);
    copy.loadJson(t.statsJson(), 'memory');
    expect(copy.stats()).toEqual(t.stats());
  });
});
