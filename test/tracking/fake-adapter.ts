// A scripted FrameworkAdapter: tests drive events by hand, so expected numbers
// are exact and independent of any framework's allocation behaviour.
import type { AdapterSession, DeviceMemoryReading, FrameworkAdapter } from '../../src/core/adapter.js';
import type { EventContext, MemoryEventSink, ModuleRef, Phase, StorageRef, TensorRef } from '../../src/core/events.js';

const OUTPUT_STORAGE: StorageRef = { id: 0, device: 'cpu', bytes: 4, dtype: 'float32', shape: [1] };
const OUTPUT: TensorRef = { id: 0, storage: OUTPUT_STORAGE, dtype: 'float32', shape: [1] };

export class FakeFramework implements FrameworkAdapter {
  readonly name = 'fake';
  readonly sinks = new Set<MemoryEventSink>();
  readonly live = new Set<StorageRef>();
  device = 'cpu';
  pool: DeviceMemoryReading | null = null;
  attachCount = 0;
  detachCount = 0;
  private nextId = 1;
  private ctx: { phase: Phase; module: ModuleRef | null; kernel: string | null; step: number; seq: number } = {
    phase: 'none',
    module: null,
    kernel: null,
    step: 0,
    seq: 0,
  };

  attach(sink: MemoryEventSink): AdapterSession {
    this.attachCount++;
    this.sinks.add(sink);
    let detached = false;
    return {
      module: (model) => model as ModuleRef,
      optimizer: () => ({ id: 0, className: 'FakeOptimizer', stateVariables: () => [] }),
      tensor: () => {
        throw new Error('not used');
      },
      liveStorages: () => [...this.live],
      currentDevice: () => this.device,
      deviceMemory: () => this.pool,
      detach: () => {
        if (detached) return;
        detached = true;
        this.detachCount++;
        this.sinks.delete(sink);
      },
    };
  }

  private emit(fn: (s: MemoryEventSink, ctx: EventContext) => void): void {
    this.ctx.seq++;
    for (const s of this.sinks) fn(s, this.ctx);
  }

  module(path: string, parent: ModuleRef | null = null): ModuleRef {
    const m: ModuleRef = { id: this.nextId++, path, className: 'Fake', parent, children: [], parameters: () => [], buffers: () => [] };
    if (parent) (parent.children as ModuleRef[]).push(m);
    return m;
  }

  alloc(bytes: number, device = this.device): StorageRef {
    const s: StorageRef = { id: this.nextId++, device, bytes, dtype: 'float32', shape: [bytes / 4] };
    this.live.add(s);
    this.emit((k, c) => k.onStorageAlloc?.(s, c));
    return s;
  }

  free(s: StorageRef): void {
    this.live.delete(s);
    this.emit((k, c) => k.onStorageFree?.(s, c));
  }

  /** Runs a kernel in `module`/`phase`; `body` runs between start and end (nested kernels, allocations). */
  kernel(
    name: string,
    where: { module?: ModuleRef | null; phase?: Phase; composite?: boolean; throws?: boolean },
    body: () => void = () => {},
  ): void {
    const saved = { ...this.ctx };
    this.ctx.module = where.module ?? null;
    this.ctx.phase = where.phase ?? 'forward';
    this.ctx.kernel = name;
    const ev = { name, inputs: [], outputs: [], composite: where.composite ?? false };
    this.emit((k, c) => k.onKernelStart?.(ev, c));
    body();
    this.ctx.kernel = name;
    this.ctx.module = where.module ?? null;
    this.ctx.phase = where.phase ?? 'forward';
    // Like the TFJS adapter: a kernel that threw ends with no outputs.
    const end = { ...ev, outputs: where.throws ? [] : [OUTPUT] };
    this.emit((k, c) => k.onKernelEnd?.(end, c));
    Object.assign(this.ctx, { module: saved.module, phase: saved.phase, kernel: saved.kernel });
  }

  enter(m: ModuleRef): void {
    this.ctx.phase = 'forward';
    this.emit((k, c) => k.onModuleEnter?.(m, [], c));
  }

  exit(m: ModuleRef): void {
    this.emit((k, c) => k.onModuleExit?.(m, [], c));
    this.ctx.phase = 'none';
  }

  step(): void {
    this.ctx.step++;
  }
}
