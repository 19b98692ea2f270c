// Storage batches the adapter holds back (StorageBatchSink) must reach a sink exactly as they
// would delivered at once: same order among all events, same context (phase, module, kernel, step,
// seq). The same sink watches the same training run twice: with the adapter's queue, and with it
// bypassed, so that every storage event goes out as a batch of one when it happens.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { beforeAll, describe, expect, it } from 'vitest';
import type { EventContext, ModuleRef, StorageBatchSink } from '../../src/core/events.js';
import { activeInstallation, tfjsAdapter } from '../../src/tfjs/adapter.js';
import { createDemoRun } from '../../src/tfjs/demo-model.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** Logs every event it takes, storages by the order they were first announced (ids differ between runs). */
class EventLog implements StorageBatchSink {
  readonly lines: string[] = [];
  batches = 0;
  private readonly ordinals = new Map<number, number>();
  protected where(ctx: EventContext): string {
    return `${ctx.seq} ${ctx.phase} ${ctx.module?.path ?? '-'} ${ctx.kernel ?? '-'} step ${ctx.step}`;
  }
  onStorageAlloc(): void {
    this.lines.push('object event: the adapter kept storage objects');
  }
  onStorageFree(): void {
    this.lines.push('object event: the adapter kept storage objects');
  }
  onStorageBatch(batch: Float64Array, length: number, device: string, ctx: EventContext): void {
    this.batches++;
    for (let at = 0; at < length; at += 2) {
      const where = this.where({ ...ctx, seq: ctx.seq - (length - at) / 2 + 1 });
      const id = batch[at]!;
      if (batch[at + 1]! >= 0) {
        if (!this.ordinals.has(id)) this.ordinals.set(id, this.ordinals.size);
        this.lines.push(`alloc #${this.ordinals.get(id)} ${batch[at + 1]} B on ${device} | ${where}`);
      } else this.lines.push(`free #${this.ordinals.get(id) ?? 'unannounced'} | ${where}`);
    }
  }
  onModuleEnter(m: ModuleRef, _inputs: unknown, ctx: EventContext): void {
    this.lines.push(`enter ${m.path} | ${this.where(ctx)}`);
  }
  onModuleExit(m: ModuleRef, _outputs: unknown, ctx: EventContext): void {
    this.lines.push(`exit ${m.path} | ${this.where(ctx)}`);
  }
  onBackwardModuleEnter(m: ModuleRef, ctx: EventContext): void {
    this.lines.push(`backward enter ${m.path} | ${this.where(ctx)}`);
  }
  onBackwardModuleExit(m: ModuleRef, ctx: EventContext): void {
    this.lines.push(`backward exit ${m.path} | ${this.where(ctx)}`);
  }
  onOptimizerStepStart(_o: unknown, ctx: EventContext): void {
    this.lines.push(`step start | ${this.where(ctx)}`);
  }
  onOptimizerStepEnd(_o: unknown, ctx: EventContext): void {
    this.lines.push(`step end | ${this.where(ctx)}`);
  }
}

/**
 * Also every kernel, scope, gradient and assign event (kernel events make the adapter follow the
 * running kernel: ctx.kernel is then set). Events between two context changes make the adapter
 * deliver what it held back before them; EventLog alone sees context changes with no event of its
 * own before them (the adapter must deliver at the change itself).
 */
class FullEventLog extends EventLog {
  onKernelStart(k: { name: string }, ctx: EventContext): void {
    this.lines.push(`kernel start ${k.name} | ${this.where(ctx)}`);
  }
  onKernelEnd(k: { name: string }, ctx: EventContext): void {
    this.lines.push(`kernel end ${k.name} | ${this.where(ctx)}`);
  }
  onGradientStart(xs: readonly unknown[], ctx: EventContext): void {
    this.lines.push(`gradient start (${xs.length}) | ${this.where(ctx)}`);
  }
  onGradientEnd(pairs: readonly unknown[], ctx: EventContext): void {
    this.lines.push(`gradient end (${pairs.length}) | ${this.where(ctx)}`);
  }
  onScopeStart(name: string, kind: string, ctx: EventContext): void {
    this.lines.push(`scope start ${kind} ${name} | ${this.where(ctx)}`);
  }
  onScopeEnd(name: string, kind: string, ctx: EventContext): void {
    this.lines.push(`scope end ${kind} ${name} | ${this.where(ctx)}`);
  }
  onVariableAssign(_v: unknown, _previous: unknown, ctx: EventContext): void {
    this.lines.push(`assign | ${this.where(ctx)}`);
  }
}

/**
 * Two training steps of the demo model watched by `sink`, then more tensors made and freed outside
 * any kernel than the queue holds; the session detaches with events still held back. `holdBack`
 * false: the adapter's queue is bypassed (its queueing methods decline every event).
 */
function watch(sink: EventLog, holdBack: boolean): { lines: string[]; queuedAllocs: number } {
  const run = createDemoRun({ inputs: 4, hidden: 8, outputs: 2, batchSize: 2 });
  const session = tfjsAdapter.attach(sink);
  const identity = activeInstallation()!.identity;
  let queuedAllocs = 0;
  const queueAlloc = identity.queueAlloc;
  identity.queueAlloc = function (this: typeof identity, a) {
    const queued = holdBack && queueAlloc.call(this, a);
    if (queued) queuedAllocs++;
    return queued;
  };
  if (!holdBack) identity.queueFree = () => false;
  try {
    session.module(run.model);
    session.optimizer(run.optimizer);
    run.train(2);
    const many: tf.Tensor[] = [];
    for (let i = 0; i < 1100; i++) many.push(tf.ones([i % 7 + 1], i % 3 === 0 ? 'bool' : i % 3 === 1 ? 'int32' : 'float32'));
    // Strings' bytes are read from the backend (not queued); complex64's are 8 per element (queued).
    for (let i = 0; i < 5; i++) many.push(tf.tensor(['s'.repeat(1001 + i)]), tf.complex([1, i], [0, 1]));
    tf.dispose(many);
    run.dispose();
  } finally {
    session.detach();
  }
  return { lines: sink.lines, queuedAllocs };
}

describe('storage batches held back by the TFJS adapter', () => {
  it.each([
    ['storage, module and optimizer events', () => new EventLog()],
    ['every event', () => new FullEventLog()],
  ])('reach a sink of %s in the same order and with the same context as batches sent at once', (_kind, make) => {
    const direct = watch(make(), false);
    const held = make();
    const queued = watch(held, true);
    expect(direct.queuedAllocs).toBe(0);
    // All but the first new storage (which starts the queueing) of ~100 per step.
    expect(queued.queuedAllocs).toBeGreaterThan(1100 + 150);
    expect(queued.lines.filter((l) => l.startsWith('object event'))).toEqual([]);
    expect(queued.lines.length).toBeGreaterThan(2600);
    expect(queued.lines.filter((l) => /^alloc #\d+ 100[1-5] B/.test(l))).toHaveLength(5); // the strings
    expect(queued.lines).toEqual(direct.lines);
    // In fewer calls than events: a batch per module, optimizer (and kernel, scope...) event at most.
    expect(held.batches).toBeGreaterThan(20);
    expect(held.batches).toBeLessThan(queued.lines.filter((l) => l.startsWith('alloc') || l.startsWith('free')).length / 4);
  });
});
