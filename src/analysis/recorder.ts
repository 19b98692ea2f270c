/**
 * ProfileRecorder: a MemoryEventSink that records what torch.profiler records
 * for memory profiling — a tree of events (profile-tree.ts) — from the
 * framework-free event stream. It never sees the framework: src/tfjs/profile.ts
 * attaches it to the TFJS adapter, and tests may feed it events directly.
 *
 * Tree building: every event that begins while another is open becomes its
 * child (an allocation inside a kernel is that kernel's child, as in PyTorch).
 * Mismatched or missing ends never throw (the sink must not break the user's
 * program): an end pops back to its matching start, and `finish()` closes
 * whatever is still open.
 */

import type {
  DeviceName,
  EventContext,
  GradientPair,
  KernelEvent,
  MemoryEventSink,
  ModuleRef,
  OptimizerRef,
  ScopeKind,
  StorageRef,
  TensorRef,
} from '../core/events.js';
import type {
  AllocationEvent,
  AssignEvent,
  GradientEvent,
  ModuleEvent,
  OpEvent,
  OpRole,
  OptimizerEvent,
  ProfileConfig,
  ProfileEvent,
  TensorMeta,
} from './profile-tree.js';
import { traverseDfs } from './profile-tree.js';

/** What a finished recording holds. */
export interface RecordedProfile {
  readonly config: ProfileConfig;
  readonly roots: readonly ProfileEvent[];
  /** Highest bytes allocated per device while recording (storages alive at start included). */
  readonly peakAllocatedBytes: ReadonlyMap<DeviceName, number>;
  /**
   * Every tensor seen, by the framework's tensor id, on the storage it was
   * last seen on (a variable: its storage after its last assign). Lets callers
   * find a tensor they hold, e.g. `profile.keyOfTensor(t.id)`.
   */
  readonly tensors: ReadonlyMap<number, TensorMeta>;
  /** Wall clock (ns, same clock as the events) when recording started and ended. */
  readonly startNs: number;
  readonly endNs: number;
}

/** A monotonic clock in nanoseconds. */
export type NsClock = () => number;

const defaultClock: NsClock = () => Math.floor(performance.now() * 1e6);

const NO_CHILDREN: ProfileEvent[] = [];
const NO_TENSORS: TensorMeta[] = [];

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export class ProfileRecorder implements MemoryEventSink {
  private readonly roots: ProfileEvent[] = [];
  private readonly open: ProfileEvent[] = [];
  private seq = 0;
  private lastNs = -1;
  private readonly firstNs: number;
  private finished: RecordedProfile | null = null;

  /** storageId → allocation id (order of first appearance, from 1). */
  private readonly allocationIds = new Map<number, number>();
  /** Union-find over storages linked by a tensor that moved between them. */
  private readonly parentOf = new Map<number, number>();
  /** Storages seen as a tensor (anything but a bare alloc/free): only these get tensor ids. */
  private readonly tensorStorages = new Set<number>();
  /** tensorId → storageId it was last seen on (a variable moves on assign). */
  private readonly storageOfTensor = new Map<number, number>();
  private readonly metas: TensorMeta[] = [];
  private readonly metaOf = new WeakMap<TensorRef, TensorMeta>();
  private readonly storageInfo = new Map<number, { readonly device: DeviceName; readonly bytes: number }>();
  private readonly tensorInfo = new Map<number, { readonly dtype: string; readonly shape: readonly number[]; readonly variableName: string | undefined }>();
  private readonly allocations: AllocationEvent[] = [];

  /** Latest gradient returned for each differentiated tensor (by tensor id): TFJS keeps no `.grad`. */
  private readonly latestGrad = new Map<number, TensorRef>();
  private readonly freed = new Set<number>();
  private readonly liveBytes = new Map<DeviceName, number>();
  private readonly peakBytes = new Map<DeviceName, number>();
  private readonly optimizerStateAtStart = new Map<OptimizerEvent, TensorRef[]>();
  private readonly optimizerRefs = new Map<OptimizerEvent, OptimizerRef>();
  private readonly moduleRefs = new Map<ModuleEvent, ModuleRef>();

  constructor(
    readonly config: ProfileConfig,
    options: { clock?: NsClock } = {},
  ) {
    this.clock = options.clock ?? defaultClock;
    this.firstNs = this.now();
  }

  /** Storages alive when recording started (counted towards the peak; not events). */
  addBaseline(storages: Iterable<StorageRef>): void {
    for (const s of storages) this.addLive(s.device, s.bytes);
  }

  private readonly clock: NsClock;

  // ---- MemoryEventSink -------------------------------------------------------

  onStorageAlloc(storage: StorageRef, _ctx?: EventContext): void {
    this.addLive(storage.device, storage.bytes);
    // The TFJS adapter announces a storage made before it was installed when it
    // first meets it (TfjsStorage.adopted): that is no allocation. Left out,
    // the storage shows as PREEXISTING, as in PyTorch.
    if ((storage as { readonly adopted?: boolean }).adopted === true) return;
    if (!this.config.profileMemory || this.finished) return;
    this.leaf(this.allocation(storage, true));
  }

  onStorageFree(storage: StorageRef, _ctx?: EventContext): void {
    this.addLive(storage.device, -storage.bytes);
    this.freed.add(storage.id);
    if (!this.config.profileMemory || this.finished) return;
    this.leaf(this.allocation(storage, false));
  }

  onTensorCreate(tensor: TensorRef, _ctx?: EventContext): void {
    if (!this.finished) this.observe(tensor);
  }

  onTensorDispose(tensor: TensorRef, _ctx?: EventContext): void {
    if (!this.finished) this.observe(tensor);
  }

  onKernelStart(kernel: KernelEvent, _ctx?: EventContext): void {
    if (this.finished) return;
    const e = this.op(kernel.name, 'kernel', kernel.composite);
    e.inputs = this.config.recordShapes ? kernel.inputs.map((t) => this.meta(t)) : null;
    this.push(e);
  }

  onKernelEnd(kernel: KernelEvent, _ctx?: EventContext): void {
    if (this.finished) return;
    const e = this.pop((o) => o.kind === 'op' && o.opKind === 'kernel' && o.name === kernel.name);
    if (e && e.kind === 'op') {
      e.outputs = this.config.recordShapes ? kernel.outputs.map((t) => this.meta(t)) : null;
    }
  }

  onScopeStart(name: string, kind: ScopeKind, _ctx?: EventContext): void {
    if (this.finished) return;
    const top = this.open.length > 0 ? this.open[this.open.length - 1]! : null;
    let role: OpRole = 'plain';
    // engine.gradients runs the user's function in tidy('forward') and backprop
    // in tidy('backward'). Backprop runs each gradient closure in its own tidy;
    // gradient functions that compute eagerly, and the accumulation of
    // gradients, run as ops directly in the backward tidy. Each of these
    // top-level regions is one backward node (PyTorch's `MulBackward0`).
    if (name === 'backward' && top?.kind === 'gradient') role = 'backward-region';
    else if (top?.kind === 'op' && top.role === 'backward-region' && kind !== 'annotation') role = 'backward-closure';
    this.push(this.op(name, kind, false, role));
  }

  onScopeEnd(name: string, kind: ScopeKind, _ctx?: EventContext): void {
    if (this.finished) return;
    this.pop((o) => o.kind === 'op' && o.opKind === kind && o.name === name);
  }

  onModuleEnter(module: ModuleRef, _inputs: readonly TensorRef[], _ctx?: EventContext): void {
    if (!this.config.withStack || this.finished) return;
    const e: ModuleEvent = { ...this.base(module.path), kind: 'module', path: module.path, className: module.className, parameters: [] };
    // Weights may not exist yet (TFJS layers build on first call): read again on exit.
    e.parameters = this.moduleParameters(module);
    this.moduleRefs.set(e, module);
    this.push(e);
  }

  onModuleExit(module: ModuleRef, _outputs: readonly TensorRef[], _ctx?: EventContext): void {
    if (!this.config.withStack || this.finished) return;
    this.pop((o) => o.kind === 'module' && this.moduleRefs.get(o) === module);
  }

  onGradientStart(_xs: readonly TensorRef[], _ctx?: EventContext): void {
    if (this.finished) return;
    this.push({ ...this.base('gradients'), kind: 'gradient', pairs: [] });
  }

  onGradientEnd(pairs: readonly GradientPair[], _ctx?: EventContext): void {
    if (this.finished) return;
    for (const p of pairs) if (p.grad) this.latestGrad.set(p.x.id, p.grad);
    const e = this.pop((o) => o.kind === 'gradient');
    if (e?.kind === 'gradient') {
      e.pairs = pairs.map((p) => ({ x: this.meta(p.x), grad: p.grad ? this.meta(p.grad) : null }));
    }
  }

  onOptimizerStepStart(optimizer: OptimizerRef, _ctx?: EventContext): void {
    if (!this.config.withStack || this.finished) return;
    const e: OptimizerEvent = { ...this.base(`${optimizer.className}.step`), kind: 'optimizer', className: optimizer.className, parameters: [], state: [] };
    this.optimizerStateAtStart.set(e, optimizer.stateVariables());
    this.optimizerRefs.set(e, optimizer);
    this.push(e);
  }

  onOptimizerStepEnd(optimizer: OptimizerRef, _ctx?: EventContext): void {
    if (!this.config.withStack || this.finished) return;
    this.pop((o) => o.kind === 'optimizer' && this.optimizerRefs.get(o) === optimizer);
  }

  onVariableAssign(variable: TensorRef, previous: StorageRef, _ctx?: EventContext): void {
    if (this.finished) return;
    const meta = this.meta(variable);
    this.link(previous.id, variable.storage.id);
    const parentList = this.open.length > 0 ? this.open[this.open.length - 1]!.children : this.roots;
    // The engine frees the old storage inside `assign` (dispose, then take the
    // new dataId). Adopt that free so the assign node shows both halves.
    const last = parentList[parentList.length - 1];
    const adopted = last?.kind === 'allocation' && !last.isAllocation && last.storageId === previous.id ? last : null;
    const base = adopted ? { name: 'Variable.assign', startSeq: adopted.startSeq, startNs: adopted.startNs } : this.base('Variable.assign');
    const e: AssignEvent = {
      ...base,
      endSeq: 0,
      endNs: 0,
      parent: null,
      children: [],
      kind: 'assign',
      variable: meta,
      previousStorageId: previous.id,
    };
    if (adopted) {
      parentList.pop();
      adopted.parent = e;
      e.children.push(adopted);
    }
    this.leaf(e);
  }

  // ---- Result ---------------------------------------------------------------

  /** Stops recording (idempotent) and returns the tree with logical tensor ids assigned. */
  finish(): RecordedProfile {
    if (this.finished) return this.finished;
    const endNs = this.now();
    while (this.open.length > 0) this.close(this.open.pop()!, this.seq++, endNs);
    this.assignTensorIds();
    this.nameClosures();
    const tensors = new Map<number, TensorMeta>();
    for (const [tensorId, storageId] of this.storageOfTensor) {
      const storage = this.storageInfo.get(storageId)!;
      const t = this.tensorInfo.get(tensorId)!;
      tensors.set(tensorId, {
        tensorId,
        storageId,
        allocationId: this.allocationIds.get(storageId)!,
        id: this.idOfStorage(storageId)!,
        device: storage.device,
        dtype: t.dtype,
        shape: [...t.shape],
        bytes: storage.bytes,
        ...(t.variableName !== undefined ? { variableName: t.variableName } : {}),
      });
    }
    this.finished = {
      config: this.config,
      roots: this.roots,
      tensors,
      peakAllocatedBytes: new Map(this.peakBytes),
      startNs: this.firstNs,
      endNs,
    };
    return this.finished;
  }

  // ---- internals ------------------------------------------------------------

  private now(): number {
    const t = Math.max(this.clock(), this.lastNs + 1);
    this.lastNs = t;
    return t;
  }

  private base(name: string) {
    return { name, startSeq: this.seq++, startNs: this.now(), endSeq: -1, endNs: -1, parent: null, children: [] as ProfileEvent[] };
  }

  // op() and allocation() run for every kernel, scope and storage: plain
  // literals of one shape each (no spreads), and allocations, which never
  // have children, share one empty array.
  private op(name: string, kind: OpEvent['opKind'], composite: boolean, role: OpRole = 'plain'): OpEvent {
    return {
      name,
      startSeq: this.seq++,
      startNs: this.now(),
      endSeq: -1,
      endNs: -1,
      parent: null,
      children: [],
      kind: 'op',
      opKind: kind,
      role,
      scope: kind === 'backward' || role !== 'plain' ? 'backward_function' : 'function',
      inputs: NO_TENSORS,
      outputs: NO_TENSORS,
      composite,
    };
  }

  private allocation(storage: StorageRef, isAllocation: boolean): AllocationEvent {
    const e: AllocationEvent = {
      name: '[memory]',
      startSeq: this.seq++,
      startNs: this.now(),
      endSeq: -1,
      endNs: -1,
      parent: null,
      children: NO_CHILDREN,
      kind: 'allocation',
      isAllocation,
      allocSize: isAllocation ? storage.bytes : -storage.bytes,
      storageId: storage.id,
      allocationId: this.allocationIdOf(storage.id),
      device: storage.device,
      id: null,
    };
    this.allocations.push(e);
    return e;
  }

  private leaf(e: ProfileEvent): void {
    (e as Mutable<ProfileEvent>).endSeq = e.startSeq;
    (e as Mutable<ProfileEvent>).endNs = e.startNs;
    this.attach(e);
  }

  private attach(e: ProfileEvent): void {
    const parent = this.open.length > 0 ? this.open[this.open.length - 1]! : null;
    e.parent = parent;
    (parent ? parent.children : this.roots).push(e);
  }

  private push(e: ProfileEvent): void {
    this.attach(e);
    this.open.push(e);
  }

  /** Closes the innermost open event matching `matches` (and anything opened inside it). */
  private pop(matches: (e: ProfileEvent) => boolean): ProfileEvent | null {
    let i = this.open.length - 1;
    while (i >= 0 && !matches(this.open[i]!)) i--;
    if (i < 0) return null;
    const endNs = this.now();
    const endSeq = this.seq++;
    let closed: ProfileEvent | null = null;
    while (this.open.length > i) {
      closed = this.open.pop()!;
      this.close(closed, endSeq, endNs);
    }
    return closed;
  }

  /** Ends an event, completing what layer and optimizer events learn at their end. */
  private close(e: ProfileEvent, endSeq: number, endNs: number): void {
    e.endSeq = endSeq;
    e.endNs = endNs;
    if (e.kind === 'module') {
      const module = this.moduleRefs.get(e);
      if (module) {
        // Weights may not exist at enter (TFJS layers build on first call).
        const seen = new Set(e.parameters.map((p) => p.param.tensorId));
        for (const p of this.moduleParameters(module)) if (!seen.has(p.param.tensorId)) e.parameters.push(p);
        this.moduleRefs.delete(e);
      }
    } else if (e.kind === 'optimizer') {
      const ref = this.optimizerRefs.get(e);
      if (ref) this.completeOptimizerStep(e, ref);
    }
  }

  private allocationIdOf(storageId: number): number {
    let id = this.allocationIds.get(storageId);
    if (id === undefined) {
      id = this.allocationIds.size + 1;
      this.allocationIds.set(storageId, id);
    }
    return id;
  }

  /** Notes that `tensor` lives on its storage now (linking storages a tensor moved between). */
  private observe(tensor: TensorRef): void {
    const storage = tensor.storage;
    const storageId = storage.id;
    // Small records, not the refs: a long recording must not keep every tensor handle alive.
    if (!this.storageInfo.has(storageId)) this.storageInfo.set(storageId, { device: storage.device, bytes: storage.bytes });
    if (!this.tensorInfo.has(tensor.id)) {
      this.tensorInfo.set(tensor.id, { dtype: tensor.dtype, shape: tensor.shape, variableName: tensor.variableName });
    }
    this.allocationIdOf(storageId);
    this.tensorStorages.add(storageId);
    const before = this.storageOfTensor.get(tensor.id);
    if (before !== undefined && before !== storageId) this.link(before, storageId);
    this.storageOfTensor.set(tensor.id, storageId);
  }

  /**
   * The metadata of `tensor` on the storage it holds now. One object per
   * (tensor, storage): a tensor read by many kernels shares it (ids are
   * written into it when the recording ends).
   */
  private meta(tensor: TensorRef): TensorMeta {
    const storage = tensor.storage;
    const cached = this.metaOf.get(tensor);
    if (cached !== undefined && cached.storageId === storage.id) return cached;
    this.observe(tensor);
    const m: TensorMeta = {
      tensorId: tensor.id,
      storageId: storage.id,
      allocationId: this.allocationIdOf(storage.id),
      id: -1,
      device: storage.device,
      dtype: tensor.dtype,
      shape: tensor.shape,
      bytes: storage.bytes,
      variableName: tensor.variableName,
    };
    this.metaOf.set(tensor, m);
    this.metas.push(m);
    return m;
  }

  private find(storageId: number): number {
    let root = storageId;
    for (let p = this.parentOf.get(root); p !== undefined && p !== root; p = this.parentOf.get(root)) root = p;
    // Path compression.
    for (let s = storageId; s !== root; ) {
      const next = this.parentOf.get(s)!;
      this.parentOf.set(s, root);
      s = next;
    }
    return root;
  }

  private link(a: number, b: number): void {
    this.allocationIdOf(a);
    this.allocationIdOf(b);
    this.tensorStorages.add(a);
    this.tensorStorages.add(b);
    const ra = this.find(a);
    const rb = this.find(b);
    if (ra !== rb) this.parentOf.set(rb, ra);
  }

  /** Numbers storage groups 0, 1, ... in order of their first appearance, and writes the ids back. */
  private assignTensorIds(): void {
    const groupFirst = new Map<number, number>();
    for (const storageId of this.tensorStorages) {
      const root = this.find(storageId);
      const first = this.allocationIds.get(storageId)!;
      const known = groupFirst.get(root);
      if (known === undefined || first < known) groupFirst.set(root, first);
    }
    const order = [...groupFirst.entries()].sort((a, b) => a[1] - b[1]);
    const idOfRoot = new Map<number, number>(order.map(([root], i) => [root, i]));
    this.idOfRoot = idOfRoot;
    for (const m of this.metas) m.id = this.idOfStorage(m.storageId)!;
    for (const a of this.allocations) a.id = this.idOfStorage(a.storageId);
  }

  private idOfRoot = new Map<number, number>();

  private idOfStorage(storageId: number): number | null {
    return this.tensorStorages.has(storageId) ? this.idOfRoot.get(this.find(storageId))! : null;
  }

  /** A closure tidy has no name of its own: call it after the backward scope or kernels it ran. */
  private nameClosures(): void {
    for (const e of traverseDfs(this.roots)) {
      if (e.kind !== 'op' || e.role !== 'backward-closure' || e.opKind === 'backward') continue;
      const inner = [...traverseDfs(e.children)];
      const named = inner.find((i) => i.kind === 'op' && i.opKind === 'backward');
      if (named) {
        e.name = named.name;
        continue;
      }
      const kernels = [...new Set(inner.filter((i) => i.kind === 'op' && i.opKind === 'kernel').map((i) => i.name))];
      e.name = `Backward[${kernels.join(',')}]`;
    }
  }

  private moduleParameters(module: ModuleRef) {
    return module.parameters().map((p) => ({
      name: p.variableName ?? `${module.path}.${p.id}`,
      param: this.meta(p),
      grad: this.liveGrad(p),
    }));
  }

  /** TFJS variables carry no `.grad`: the closest equivalent is the last gradient returned for them, while it is alive. */
  private liveGrad(p: TensorRef): TensorMeta | null {
    const g = this.latestGrad.get(p.id);
    return g && !this.freed.has(g.storage.id) ? this.meta(g) : null;
  }

  private completeOptimizerStep(e: OptimizerEvent, optimizer: OptimizerRef): void {
    const state = new Map<number, TensorRef>();
    for (const t of this.optimizerStateAtStart.get(e) ?? []) state.set(t.id, t);
    for (const t of optimizer.stateVariables()) state.set(t.id, t);
    e.state = [...state.values()].map((t) => this.meta(t));
    // Parameters: the variables the step assigned that are not optimizer state.
    const params = new Map<number, TensorMeta>();
    for (const ev of traverseDfs(e.children)) {
      if (ev.kind === 'assign' && !state.has(ev.variable.tensorId)) params.set(ev.variable.tensorId, ev.variable);
    }
    e.parameters = [...params.values()].map((param) => {
      const g = this.latestGrad.get(param.tensorId);
      return { param, grad: g ? this.meta(g) : null };
    });
    this.optimizerStateAtStart.delete(e);
    this.optimizerRefs.delete(e);
  }

  private addLive(device: DeviceName, delta: number): void {
    const now = (this.liveBytes.get(device) ?? 0) + delta;
    this.liveBytes.set(device, now);
    if (now > (this.peakBytes.get(device) ?? 0)) this.peakBytes.set(device, now);
  }
}
