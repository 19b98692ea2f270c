// MemTracker's bookkeeping against a scripted framework: every number below
// follows from the script, so a wrong category, a missed free or a wrong peak
// shows up as a wrong number. The TFJS tests (mem-tracker-tfjs.test.ts) check
// the same rules on real models.
import { describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { MemTracker } from '../../src/tracking/mem-tracker.js';
import type { MemTrackerSnapshot, ModuleMemStats } from '../../src/tracking/mem-types.js';
import { FakeFramework, FakeModule, FakeOptimizer, type FakeTensor } from './mem-fake-framework.js';

/** net{fc1, bn, fc2}: fc1 400+40 B, bn γβ 16+16 B trainable and 16+16 B moving stats, fc2 40+4 B. */
function buildNet(fw: FakeFramework) {
  const net = new FakeModule('net', 'Sequential');
  const fc1 = new FakeModule('fc1', 'Dense', net);
  const bn = new FakeModule('bn', 'BatchNormalization', net);
  const fc2 = new FakeModule('fc2', 'Dense', net);
  fc1.params = [fw.variable(400, 'fc1/kernel'), fw.variable(40, 'fc1/bias')];
  bn.params = [fw.variable(16, 'bn/gamma'), fw.variable(16, 'bn/beta')];
  bn.bufs = [fw.variable(16, 'bn/moving_mean', false), fw.variable(16, 'bn/moving_variance', false)];
  fc2.params = [fw.variable(40, 'fc2/kernel'), fw.variable(4, 'fc2/bias')];
  return { net, fc1, bn, fc2 };
}

const TRAINABLE = 400 + 40 + 16 + 16 + 40 + 4;
const NON_TRAINABLE = 32;

/** One training step as TFJS runs it: forward inside a gradient computation, backward, Adam-like step. */
function trainStep(fw: FakeFramework, m: ReturnType<typeof buildNet>, opt: FakeOptimizer, x: FakeTensor) {
  const trainable = [...m.fc1.params, ...m.bn.params, ...m.fc2.params];
  fw.gradientStart(trainable);
  const saved: FakeTensor[] = [];
  fw.forward(m.net, [x], () => {
    const h1 = fw.forward(m.fc1, [x], () => fw.alloc(40), (r) => [r]);
    const h2 = fw.forward(m.bn, [h1], () => {
      const out = fw.alloc(40);
      fw.assign(m.bn.bufs[0]!, fw.alloc(16)); // moving mean update, as BatchNorm does in training
      return out;
    }, (r) => [r]);
    const y = fw.forward(m.fc2, [h2], () => fw.alloc(4), (r) => [r]);
    saved.push(h1, h2, y);
    return y;
  }, (r) => [r]);
  const grads = new Map<FakeTensor, FakeTensor>();
  fw.backwardModule(m.net, () => {
    fw.backwardModule(m.fc2, () => {
      grads.set(m.fc2.params[0]!, fw.alloc(40));
      grads.set(m.fc2.params[1]!, fw.alloc(4));
      saved.push(fw.alloc(40)); // dh2: a Temp
    });
    fw.backwardModule(m.bn, () => {
      grads.set(m.bn.params[0]!, fw.alloc(16));
      grads.set(m.bn.params[1]!, fw.alloc(16));
      saved.push(fw.alloc(40)); // dh1
    });
    fw.backwardModule(m.fc1, () => {
      grads.set(m.fc1.params[0]!, fw.alloc(400));
      grads.set(m.fc1.params[1]!, fw.alloc(40));
    });
  });
  // engine.gradients' tidy frees the forward and backward intermediates before returning.
  for (const t of saved) fw.free(t);
  fw.gradientEnd(trainable.map((x) => ({ x, grad: grads.get(x)! })));
  fw.step(opt, () => {
    for (const w of trainable) {
      if (opt.state.length < 2 * trainable.length) {
        opt.state.push(fw.variable(w.storage.bytes, `${w.variableName}/m`, false));
        opt.state.push(fw.variable(w.storage.bytes, `${w.variableName}/v`, false));
      }
      fw.assign(w, fw.alloc(w.storage.bytes));
    }
  });
  for (const g of grads.values()) fw.free(g);
}

describe('MemTracker on a scripted framework', () => {
  it('classifies weights, activations, gradients and optimizer state like PyTorch', () => {
    const fw = new FakeFramework();
    const m = buildNet(fw);
    const opt = new FakeOptimizer();
    const x = fw.alloc(80);
    const tracker = new MemTracker(fw);
    tracker.trackExternal(m.net, opt, x);
    tracker.track(() => trainStep(fw, m, opt, x));

    const current = tracker.snapshot('current');
    expect(current.cpu).toEqual({
      Parameter: TRAINABLE,
      Buffer: NON_TRAINABLE,
      Gradient: 0,
      Activation: 0,
      Temp: 0,
      Optstate: 2 * TRAINABLE,
      Other: 80,
      Total: TRAINABLE + NON_TRAINABLE + 2 * TRAINABLE + 80,
    });

    const stats = new Map(tracker.moduleStats().map((s) => [s.modFqn, s]));
    expect([...stats.keys()].sort()).toEqual(['net', 'net.bn', 'net.fc1', 'net.fc2']);
    const net = stats.get('net')!;
    expect(net.parameterMem).toBe(TRAINABLE);
    expect(net.bufferMem).toBe(NON_TRAINABLE);
    expect(net.inputMem).toBe(80);
    expect(net.outputMem).toBe(4);
    expect(stats.get('net.bn')!.inputMem).toBe(40);
    // The root's Post-Backward is taken once the gradients are handed out: they are all Gradient.
    const postBw = net.snapshots['Post-Backward']![0]!.cpu!;
    expect(postBw.Gradient).toBe(TRAINABLE);
    expect(postBw.Temp).toBe(0);
    // Inner modules' Post-Backward come while their gradients are still Temp.
    expect(stats.get('net.fc2')!.snapshots['Post-Backward']![0]!.cpu!.Temp).toBe(40 + 4 + 40);

    // The global peak comes in the optimizer step, when fc1's kernel has its m, v and new value
    // (3 × 400 B of Optstate) while every gradient is still alive.
    const peak = tracker.snapshot('peak').cpu!;
    expect(peak).toEqual({
      Parameter: TRAINABLE,
      Buffer: NON_TRAINABLE,
      Gradient: TRAINABLE,
      Activation: 0,
      Temp: 0,
      Optstate: 1200,
      Other: 80,
      Total: TRAINABLE + NON_TRAINABLE + TRAINABLE + 1200 + 80,
    });
    for (const s of stats.values()) {
      for (const bytes of Object.values(s.localPeak)) expect(peak.Total).toBeGreaterThanOrEqual(bytes);
    }
    // The root's backward peaks at its end, before the tidy frees the intermediates: forward
    // activations (40 + 40 + 4), backward temps (dh2, dh1) and every gradient, still Temp.
    expect(net.snapshots['Peak-Backward']![0]!.cpu).toEqual({
      Parameter: TRAINABLE,
      Buffer: NON_TRAINABLE,
      Gradient: 0,
      Activation: 84,
      Temp: 80 + TRAINABLE,
      Optstate: 0,
      Other: 80,
      Total: TRAINABLE + NON_TRAINABLE + 84 + 80 + TRAINABLE + 80,
    });
    expect(net.localPeak.cpu).toBe(net.snapshots['Peak-Backward']![0]!.cpu!.Total);
    // fc1's backward starts after fc2's and bn's temps exist; its local peak includes them.
    expect(stats.get('net.fc1')!.snapshots['Peak-Backward']![0]!.cpu!.Temp).toBe(80 + TRAINABLE);
  });

  it('keeps a weight in its category across assign, wherever the new storage came from', () => {
    const fw = new FakeFramework();
    const m = buildNet(fw);
    const tracker = new MemTracker(fw);
    tracker.trackExternal(m.net);
    using _t = tracker.start();
    const next = fw.alloc(400); // an Activation, then the kernel's new value
    fw.assign(m.fc1.params[0]!, next);
    expect(tracker.snapshot().cpu!.Parameter).toBe(TRAINABLE);
    expect(tracker.snapshot().cpu!.Activation).toBe(0);
  });

  it('rounds every storage to the device granularity (wasm: 8 B) and keeps devices apart', () => {
    const fw = new FakeFramework();
    const tracker = new MemTracker(fw);
    tracker.track(() => {
      fw.alloc(4, 'wasm');
      fw.alloc(12, 'wasm');
      fw.alloc(4, 'cpu');
    });
    const snap = tracker.snapshot();
    expect(snap.wasm!.Activation).toBe(8 + 16);
    expect(snap.cpu!.Activation).toBe(4);
  });

  it('applies allocations and frees in order, however many arrive between two other events', () => {
    // The recorder queues allocations and frees (1,024 at most) and applies them before anything
    // else it does: 3,000 events inside one call, on two devices, and reads in the middle of them.
    const fw = new FakeFramework();
    const net = new FakeModule('net', 'Sequential');
    const inner = new FakeModule('inner', 'Dense', net);
    const tracker = new MemTracker(fw);
    let midCall: MemTrackerSnapshot = {};
    let midPeak: MemTrackerSnapshot = {};
    tracker.track(() => {
      fw.forward(net, [], () => {
        const held: FakeTensor[] = [];
        for (let i = 0; i < 1000; i++) held.push(fw.alloc(8), fw.alloc(12, 'wasm')); // wasm rounds 12 to 16
        midCall = tracker.snapshot();
        for (const t of held.splice(0, 1500)) fw.free(t);
        midPeak = tracker.snapshot('peak');
        // Inside `inner`, a peak below net's: net keeps its own, inner gets its own.
        return fw.forward(inner, [], () => fw.alloc(40), (r) => [r]);
      }, (r) => [r]);
    });
    expect(midCall.cpu!.Activation).toBe(8000);
    expect(midCall.wasm!.Activation).toBe(16000);
    expect(midPeak.cpu!.Total).toBe(8000);
    expect(midPeak.wasm!.Total).toBe(16000);
    // 1,500 freed in order: the first 750 pairs; 250 pairs remain (2,000 + 4,000 B), then inner's 40.
    const now = tracker.snapshot();
    expect(now.cpu!.Activation).toBe(250 * 8 + 40);
    expect(now.wasm!.Activation).toBe(250 * 16);
    const stats = new Map(tracker.moduleStats().map((s) => [s.modFqn, s]));
    expect(stats.get('net')!.localPeak).toEqual({ cpu: 8000, wasm: 16000 });
    expect(stats.get('net.inner')!.localPeak).toEqual({ cpu: 250 * 8 + 40, wasm: 250 * 16 });
  });

  it('prints snapshots and module-wise snapshots in PyTorch layout', () => {
    const fw = new FakeFramework();
    const net = new FakeModule('net', 'Sequential');
    const fc = new FakeModule('fc', 'Dense', net);
    const fc10 = new FakeModule('fc10', 'Dense', net);
    const fc2 = new FakeModule('fc2', 'Dense', net);
    fc.params = [fw.variable(1024, 'fc/kernel')];
    const tracker = new MemTracker(fw);
    tracker.track(() => {
      fw.forward(net, [], () => {
        for (const layer of [fc, fc2, fc10]) fw.forward(layer, [], () => fw.alloc(512), (r) => [r]);
      }, () => []);
    });
    expect(tracker.formatSnapshot('peak', { units: 'KiB' })).toMatchInlineSnapshot(`
      "Device: cpu
      	Parameter: 1.00 KiB
      	Buffer: 0.00 KiB
      	Gradient: 0.00 KiB
      	Activation: 1.50 KiB
      	Temp: 0.00 KiB
      	Optstate: 0.00 KiB
      	Other: 0.00 KiB
      	Total: 2.50 KiB"
    `);
    // Natural order: fc, fc2, fc10. Depth 1 shows only the root.
    expect(tracker.formatModulewiseSnapshots({ depth: 2 }).match(/^Module: .*$/gm)).toEqual([
      'Module:  net',
      'Module:  net.fc',
      'Module:  net.fc2',
      'Module:  net.fc10',
    ]);
    expect(tracker.formatModulewiseSnapshots({ depth: 1, tabulate: true })).toMatchInlineSnapshot(`
      "Module:  net
      ┌──────────────────┬────────┬───────────┬────────┬──────────┬────────────┬──────┬──────────┬───────┬────────┐
      │ State & Call     │ Device │ Parameter │ Buffer │ Gradient │ Activation │ Temp │ Optstate │ Other │  Total │
      ├──────────────────┼────────┼───────────┼────────┼──────────┼────────────┼──────┼──────────┼───────┼────────┤
      │ Pre-Forward # 1  │ cpu    │    1024 B │    0 B │      0 B │        0 B │  0 B │      0 B │   0 B │ 1024 B │
      │ Peak-Forward # 1 │ cpu    │    1024 B │    0 B │      0 B │     1536 B │  0 B │      0 B │   0 B │ 2560 B │
      │ Post-Forward # 1 │ cpu    │    1024 B │    0 B │      0 B │     1536 B │  0 B │      0 B │   0 B │ 2560 B │
      └──────────────────┴────────┴───────────┴────────┴──────────┴────────────┴──────┴──────────┴───────┴────────┘"
    `);
  });

  it('rejects bad units, snapshot types, depths and external objects with MemscopeError', () => {
    const fw = new FakeFramework();
    const tracker = new MemTracker(fw);
    expect(() => tracker.formatSnapshot('current', { units: 'MB' as never })).toThrow(MemscopeError);
    expect(() => tracker.formatSnapshot('current', { units: 'MB' as never })).toThrow(/unknown unit "MB"/);
    expect(() => tracker.snapshot('max' as never)).toThrow(/snapshot type "max" is not 'current' or 'peak'/);
    expect(() => tracker.displayModulewiseSnapshots({ depth: 0 })).toThrow(/depth 0/);
    expect(() => tracker.trackExternal(42)).toThrow(/argument 0 is number 42/);
    tracker.trackExternal(new (class Widget {})());
    // Resolved at start: the error names the argument, and the tracker is left stopped.
    expect(() => tracker.start()).toThrow(/argument 0 is a Widget, which is not a fake model, optimizer or tensor/);
    expect(tracker.tracking).toBe(false);
    expect(fw.detaches).toBe(fw.attaches);
    // The bad object is dropped once reported: the tracker starts next time.
    tracker.start().stop();
  });

  it('restarts cleanly: storages freed while stopped are dropped, external tensors stay classified', () => {
    const fw = new FakeFramework();
    const data = fw.alloc(64);
    const disposed = fw.alloc(32);
    fw.free(disposed);
    const tracker = new MemTracker(fw);
    tracker.trackExternal(data, disposed);
    let kept: FakeTensor | undefined;
    let dropped: FakeTensor | undefined;
    tracker.track(() => {
      kept = fw.alloc(16);
      dropped = fw.alloc(8);
    });
    // A disposed tensor holds nothing, so it is not counted as Other.
    expect(tracker.snapshot().cpu).toMatchObject({ Other: 64, Activation: 24, Total: 88 });
    fw.free(dropped!); // while stopped: no event reaches the tracker
    expect(tracker.snapshot().cpu!.Total).toBe(88);
    tracker.track(() => {});
    expect(tracker.snapshot().cpu).toMatchObject({ Other: 64, Activation: 16, Total: 80 });
    expect(kept).toBeDefined();
  });

  it('stops when the tracked function throws or rejects, and rethrows the same error', async () => {
    const fw = new FakeFramework();
    const tracker = new MemTracker(fw);
    const boom = new Error('user bug');
    let caught: unknown;
    try {
      tracker.track(() => {
        fw.alloc(8);
        throw boom;
      });
    } catch (err) {
      caught = err;
    }
    expect(caught).toBe(boom);
    expect(tracker.tracking).toBe(false);
    expect(fw.sinks.size).toBe(0);

    const rejection = new TypeError('async bug');
    await expect(tracker.track(async () => {
      await Promise.resolve();
      fw.alloc(8);
      throw rejection;
    })).rejects.toBe(rejection);
    expect(fw.sinks.size).toBe(0);
    expect(tracker.snapshot().cpu!.Activation).toBe(16);

    expect(await tracker.track(async () => 7)).toBe(7);
    expect(tracker.track(() => 'sync')).toBe('sync');
    expect(() => tracker.start().start()).toThrow(/already tracking/);
    tracker.stop();
    expect(fw.sinks.size).toBe(0);
  });

  it('keeps the earlier moment when a call inside reaches the same peak, and reads the peaks of calls still running', () => {
    const fw = new FakeFramework();
    const net = new FakeModule('net', 'Sequential');
    const inner1 = new FakeModule('inner1', 'Dense', net);
    const inner2 = new FakeModule('inner2', 'Dense', net);
    const x = fw.alloc(80);
    const tracker = new MemTracker(fw);
    tracker.trackExternal(x);
    const byName = () => new Map(tracker.moduleStats().map((s) => [s.modFqn, s]));
    let afterTie = new Map<string, ModuleMemStats>();
    let midCall = new Map<string, ModuleMemStats>();
    tracker.track(() => {
      fw.forward(net, [x], () => {
        fw.free(fw.alloc(16)); // net peaks at 96: Other 80 + Activation 16
        fw.free(x);
        const a = fw.forward(inner1, [], () => fw.alloc(96), (r) => [r]); // 96 again, all Activation
        afterTie = byName();
        fw.free(a);
        return fw.forward(inner2, [], () => {
          const b = fw.alloc(120);
          midCall = byName(); // inner2 is still running
          return b;
        }, (r) => [r]);
      }, (r) => [r]);
    });
    const cpu = (s: ModuleMemStats | undefined) => s!.snapshots['Peak-Forward']![0]!.cpu!;
    // A tie keeps the enclosing call's own, earlier moment.
    expect(afterTie.get('net')!.localPeak.cpu).toBe(96);
    expect(cpu(afterTie.get('net'))).toMatchObject({ Other: 80, Activation: 16, Total: 96 });
    expect(cpu(afterTie.get('net.inner1'))).toMatchObject({ Other: 0, Activation: 96, Total: 96 });
    // Read while inner2 runs, net already has inner2's higher peak.
    expect(midCall.get('net')!.localPeak.cpu).toBe(120);
    expect(cpu(midCall.get('net'))).toMatchObject({ Other: 0, Activation: 120, Total: 120 });
    const done = byName();
    expect(done.get('net')!.localPeak.cpu).toBe(120);
    expect(cpu(done.get('net'))).toMatchObject({ Other: 0, Activation: 120, Total: 120 });
    expect(done.get('net.inner2')!.localPeak.cpu).toBe(120);
  });

  it('gives a module called inside its own call one Peak snapshot per call, raising the latest (as PyTorch)', () => {
    const fw = new FakeFramework();
    const rec = new FakeModule('rec', 'Recurrent');
    const tracker = new MemTracker(fw);
    tracker.track(() => {
      fw.forward(rec, [], () => {
        const a = fw.alloc(8); // the outer call's peak so far: 8
        fw.forward(rec, [], () => fw.free(fw.alloc(16)), () => []); // the inner call reaches 24
        fw.alloc(40); // after the inner call: 48, raised in the inner call's snapshot
        return a;
      }, () => []);
    });
    const [stats] = tracker.moduleStats();
    const totals = (state: 'Pre-Forward' | 'Peak-Forward' | 'Post-Forward') => stats!.snapshots[state]!.map((s) => s.cpu?.Total ?? 0);
    expect(totals('Pre-Forward')).toEqual([0, 8]);
    // The outer call's snapshot stops at the inner call's start; the latest one is raised until no call runs.
    expect(totals('Peak-Forward')).toEqual([8, 48]);
    expect(totals('Post-Forward')).toEqual([8, 48]);
    expect(stats!.localPeak.cpu).toBe(48);
  });

  it('appends a call per forward and forgets modules on resetModStats', () => {
    const fw = new FakeFramework();
    const net = new FakeModule('net', 'Sequential');
    const tracker = new MemTracker(fw);
    tracker.track(() => {
      for (let i = 0; i < 3; i++) fw.forward(net, [], () => fw.alloc(4), () => []);
    });
    const [stats] = tracker.moduleStats();
    expect(stats!.snapshots['Pre-Forward']!.map((s) => s.cpu?.Total ?? 0)).toEqual([0, 4, 8]);
    expect(stats!.snapshots['Post-Forward']).toHaveLength(3);
    tracker.resetModStats();
    expect(tracker.moduleStats()).toEqual([]);
    expect(tracker.formatModulewiseSnapshots()).toBe('No modules tracked.');
  });
});
