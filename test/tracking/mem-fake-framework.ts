// A scripted framework for MemTracker's unit tests: the test says what
// happens (allocations, module calls, gradients, steps) and the fake emits the
// events a real adapter would, with modules, variables and optimizers, so the
// tracker's bookkeeping can be checked number by number without TFJS.
import type { AdapterSession, FrameworkAdapter } from '../../src/core/adapter.js';
import { MemscopeError } from '../../src/core/errors.js';
import type {
  EventContext,
  MemoryEventName,
  MemoryEventSink,
  ModuleRef,
  OptimizerRef,
  Phase,
  StorageRef,
  TensorRef,
} from '../../src/core/events.js';

let nextId = 1;

export class FakeTensor implements TensorRef {
  readonly id = nextId++;
  constructor(
    public storage: StorageRef,
    readonly variableName?: string,
    readonly trainable?: boolean,
  ) {}
  get dtype(): string {
    return this.storage.dtype;
  }
  get shape(): readonly number[] {
    return this.storage.shape;
  }
}

export class FakeModule implements ModuleRef {
  readonly id = nextId++;
  readonly children: FakeModule[] = [];
  params: FakeTensor[] = [];
  bufs: FakeTensor[] = [];
  constructor(
    readonly name: string,
    readonly className: string,
    readonly parent: FakeModule | null = null,
  ) {
    parent?.children.push(this);
  }
  get path(): string {
    return this.parent ? `${this.parent.path}.${this.name}` : this.name;
  }
  parameters(): TensorRef[] {
    return this.params;
  }
  buffers(): TensorRef[] {
    return this.bufs;
  }
}

export class FakeOptimizer implements OptimizerRef {
  readonly id = nextId++;
  readonly className = 'FakeAdam';
  state: FakeTensor[] = [];
  stateVariables(): TensorRef[] {
    return this.state;
  }
}

export class FakeFramework implements FrameworkAdapter {
  readonly name = 'fake';
  readonly sinks = new Set<MemoryEventSink>();
  readonly ctx: { phase: Phase; module: ModuleRef | null; kernel: string | null; step: number; seq: number } = {
    phase: 'none',
    module: null,
    kernel: null,
    step: 0,
    seq: 0,
  };
  readonly live = new Set<StorageRef>();
  attaches = 0;
  detaches = 0;

  attach(sink: MemoryEventSink): AdapterSession {
    this.attaches++;
    this.sinks.add(sink);
    let detached = false;
    return {
      module: (m) => {
        if (m instanceof FakeModule) return m;
        throw new MemscopeError('not-a-model', 'not a fake module');
      },
      optimizer: (o) => {
        if (o instanceof FakeOptimizer) return o;
        throw new MemscopeError('not-an-optimizer', 'not a fake optimizer');
      },
      tensor: (t) => {
        if (t instanceof FakeTensor) return t;
        throw new MemscopeError('not-a-tensor', 'not a fake tensor');
      },
      liveStorages: () => this.live,
      currentDevice: () => 'cpu',
      deviceMemory: () => null,
      detach: () => {
        if (detached) return;
        detached = true;
        this.detaches++;
        this.sinks.delete(sink);
      },
    };
  }

  private emit<K extends MemoryEventName>(
    name: K,
    ...args: Parameters<NonNullable<MemoryEventSink[K]>> extends [...infer A, EventContext] ? A : never
  ): void {
    this.ctx.seq++;
    for (const s of this.sinks) {
      const f = s[name] as ((...a: unknown[]) => void) | undefined;
      f?.call(s, ...args, this.ctx);
    }
  }

  /** A kernel output: a new storage and a tensor on it. */
  alloc(bytes: number, device = 'cpu'): FakeTensor {
    const storage: StorageRef = { id: nextId++, device, bytes, dtype: 'float32', shape: [bytes / 4] };
    this.live.add(storage);
    this.emit('onStorageAlloc', storage);
    return new FakeTensor(storage);
  }

  variable(bytes: number, name: string, trainable = true, device = 'cpu'): FakeTensor {
    const t = this.alloc(bytes, device);
    return new FakeTensor(t.storage, name, trainable);
  }

  free(t: FakeTensor): void {
    if (!this.live.delete(t.storage)) return;
    this.emit('onStorageFree', t.storage);
  }

  /** `variable.assign(value)`: the variable moves to value's storage; the old one is freed. */
  assign(variable: FakeTensor, value: FakeTensor): void {
    const previous = variable.storage;
    variable.storage = value.storage;
    this.emit('onVariableAssign', variable, previous);
    if (this.live.delete(previous)) this.emit('onStorageFree', previous);
  }

  forward<T>(module: FakeModule, inputs: FakeTensor[], body: () => T, outputs: (r: T) => FakeTensor[]): T {
    const saved = this.ctx.phase;
    this.ctx.phase = 'forward';
    this.emit('onModuleEnter', module, inputs);
    const r = body();
    this.emit('onModuleExit', module, outputs(r));
    this.ctx.phase = saved;
    return r;
  }

  backwardModule(module: FakeModule, body: () => void): void {
    this.ctx.phase = 'backward';
    this.emit('onBackwardModuleEnter', module);
    body();
    this.emit('onBackwardModuleExit', module);
  }

  gradientStart(xs: FakeTensor[]): void {
    this.emit('onGradientStart', xs);
  }

  gradientEnd(pairs: { x: FakeTensor; grad: FakeTensor | null }[]): void {
    this.ctx.phase = 'none';
    this.emit('onGradientEnd', pairs);
  }

  step(optimizer: FakeOptimizer, body: () => void): void {
    this.emit('onOptimizerStepStart', optimizer);
    this.ctx.phase = 'optimizer';
    body();
    this.ctx.phase = 'none';
    this.emit('onOptimizerStepEnd', optimizer);
    this.ctx.step++;
  }
}
