// Storage events queued by the adapter (MemoryEventSink.acceptsQueuedStorageEvents) must reach a
// sink exactly as they would unqueued: same order among all events, same context (phase, module,
// kernel, step, seq). Two sinks alike but for that declaration each watch the same training run.
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { beforeAll, describe, expect, it } from 'vitest';
import type { EventContext, MemoryEventSink, ModuleRef } from '../../src/core/events.js';
import { activeInstallation, tfjsAdapter } from '../../src/tfjs/adapter.js';
import { createDemoRun } from '../../src/tfjs/demo-model.js';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** Logs every event it takes, storages by the order they were first announced (ids differ between runs). */
class EventLog implements MemoryEventSink {
  readonly lines: string[] = [];
  private readonly ordinals = new Map<number, number>();
  constructor(readonly acceptsQueuedStorageEvents: boolean) {}
  protected where(ctx: EventContext): string {
    return `${ctx.seq} ${ctx.phase} ${ctx.module?.path ?? '-'} ${ctx.kernel ?? '-'} step ${ctx.step}`;
  }
  onStorageAlloc(): void {
    this.lines.push('object event: the adapter kept storage objects');
  }
  onStorageFree(): void {
    this.lines.push('object event: the adapter kept storage objects');
  }
  onStorageAllocId(id: number, bytes: number, device: string, ctx: EventContext): void {
    if (!this.ordinals.has(id)) this.ordinals.set(id, this.ordinals.size);
    this.lines.push(`alloc #${this.ordinals.get(id)} ${bytes} B on ${device} | ${this.where(ctx)}`);
  }
  onStorageFreeId(id: number, ctx: EventContext): void {
    this.lines.push(`free #${this.ordinals.get(id) ?? 'unannounced'} | ${this.where(ctx)}`);
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
 * Also every scope, gradient and assign event. Events between two context changes make the
 * adapter deliver what it queued before them; EventLog alone sees context changes with no event
 * of its own before them (the adapter must deliver at the change itself).
 */
class FullEventLog extends EventLog {
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

/** EventLog taking queued storage events in one call each batch (onQueuedStorageEvents); it logs them one by one. */
class BatchEventLog extends EventLog {
  batches = 0;
  onQueuedStorageEvents(events: Float64Array, length: number, device: string, ctx: EventContext): void {
    this.batches++;
    const lastSeq = ctx.seq;
    for (let at = 0; at < length; at += 2) {
      const each = { ...ctx, seq: lastSeq - (length - at) / 2 + 1 };
      if (events[at + 1]! >= 0) this.onStorageAllocId(events[at]!, events[at + 1]!, device, each);
      else this.onStorageFreeId(events[at]!, each);
    }
  }
}

/**
 * Two training steps of the demo model watched by `sink` (it reads ctx.kernel: the kernel wrapper
 * is on), then more tensors made and freed outside any kernel than the queue holds; the session
 * detaches with events still queued.
 */
function watch(sink: EventLog): { lines: string[]; queuedAllocs: number } {
  const run = createDemoRun({ inputs: 4, hidden: 8, outputs: 2, batchSize: 2 });
  const session = tfjsAdapter.attach(sink);
  const inst = activeInstallation()!;
  let queuedAllocs = 0;
  const queueAlloc = inst.queueAlloc;
  inst.queueAlloc = function (this: typeof inst, a) {
    const queued = queueAlloc.call(this, a);
    if (queued) queuedAllocs++;
    return queued;
  };
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

describe('storage events queued by the TFJS adapter', () => {
  it.each([
    ['storage, module and optimizer events', (queued: boolean) => new EventLog(queued)],
    ['every event', (queued: boolean) => new FullEventLog(queued)],
    ['storage events in batches', (queued: boolean) => new BatchEventLog(queued)],
  ])('reach a sink of %s in the same order and with the same context as unqueued ones', (_kind, make) => {
    const direct = watch(make(false));
    const queued = watch(make(true));
    expect(direct.queuedAllocs).toBe(0);
    // All but the first new storage (which starts the queueing) of ~100 per step.
    expect(queued.queuedAllocs).toBeGreaterThan(1100 + 150);
    expect(queued.lines.filter((l) => l.startsWith('object event'))).toEqual([]);
    expect(queued.lines.length).toBeGreaterThan(2600);
    expect(queued.lines.filter((l) => /^alloc #\d+ 100[1-5] B/.test(l))).toHaveLength(5); // the strings
    expect(queued.lines).toEqual(direct.lines);
  });

  it('come in batches to a sink taking them so, with the same order and context', () => {
    const sink = new BatchEventLog(true);
    const { lines } = watch(sink);
    expect(sink.batches).toBeGreaterThan(50);
    // The same events as an unqueued sink's (the test above), in fewer calls than events.
    expect(lines).toEqual(watch(new EventLog(false)).lines);
    expect(sink.batches).toBeLessThan(lines.filter((l) => l.startsWith('alloc') || l.startsWith('free')).length / 4);
  });
});
