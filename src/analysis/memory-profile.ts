/**
 * MemoryProfile: torch.profiler._memory_profiler's pipeline, with the same
 * meaning, over a recorded TFJS (or hand-built) event tree:
 *
 *   OpTree → SizeMap → DataFlowGraph (leaf events as nodes; edges carry the
 *   input version, mutation, allocation and deletion) → categories per
 *   (TensorKey, version) → timeline of (time, action, (key, version), bytes).
 *
 * Differences from PyTorch are deliberate and listed in docs/MEMORY_PROFILER.md:
 * the timeline's key type is an explicit union (pytorch#142371), unknown
 * storages keep their identity, and `Variable.assign` is the only mutation.
 */

import { MemscopeError } from '../core/errors.js';
import type { DeviceName } from '../core/events.js';
import type { AllocationEvent, ProfileEvent, TensorMeta } from './profile-tree.js';
import { inBackward, traverseDfs } from './profile-tree.js';
import type { RecordedProfile } from './recorder.js';

export type Category =
  | 'INPUT'
  | 'TEMPORARY'
  | 'ACTIVATION'
  | 'GRADIENT'
  | 'AUTOGRAD_DETAIL'
  | 'PARAMETER'
  | 'OPTIMIZER_STATE';

/** Stacking order of the timeline plot and index into its size rows (PyTorch's `_CATEGORY_TO_INDEX`); `null` is unknown. */
export const CATEGORY_ORDER: readonly (Category | null)[] = [
  'PARAMETER',
  'OPTIMIZER_STATE',
  'INPUT',
  'TEMPORARY',
  'ACTIVATION',
  'GRADIENT',
  'AUTOGRAD_DETAIL',
  null,
];

/** PyTorch's `_CATEGORY_TO_COLORS`. */
export const CATEGORY_COLORS: ReadonlyMap<Category | null, string> = new Map<Category | null, string>([
  ['PARAMETER', 'darkgreen'],
  ['OPTIMIZER_STATE', 'goldenrod'],
  ['INPUT', 'black'],
  ['TEMPORARY', 'mediumpurple'],
  ['ACTIVATION', 'red'],
  ['GRADIENT', 'mediumblue'],
  ['AUTOGRAD_DETAIL', 'royalblue'],
  [null, 'grey'],
]);

export function categoryIndex(category: Category | null): number {
  return CATEGORY_ORDER.indexOf(category);
}

export type Action = 'PREEXISTING' | 'CREATE' | 'INCREMENT_VERSION' | 'DESTROY';

/** PyTorch's `Action.value` (enum.auto() from 1), used in raw exports and as the tie-break when sorting. */
export const ACTION_INDEX: Readonly<Record<Action, number>> = {
  PREEXISTING: 1,
  CREATE: 2,
  INCREMENT_VERSION: 3,
  DESTROY: 4,
};

/**
 * A storage that has been seen as a tensor: logical tensor id + storage. Keys
 * are interned per profile (one object per storage), so `===` is equality.
 */
export class TensorKey {
  readonly kind = 'tensor' as const;
  constructor(
    /** Logical tensor id (storages a variable moved between share it). */
    readonly id: number,
    /** Profile-local storage number (PyTorch's allocation_id). */
    readonly allocationId: number,
    /** The framework's storage id (TFJS dataId number). */
    readonly storageId: number,
    readonly device: DeviceName,
  ) {}

  toString(): string {
    return `id=${this.id}: storage ${this.storageId} (${this.allocationId}) (${this.device})`;
  }
}

/**
 * A storage no tensor was ever seen on. PyTorch uses a bare `Key(device)` here,
 * so all such storages on a device look alike and consumers that expect a
 * TensorKey crash (pytorch#142371); this key says what it is and which storage.
 */
export interface UnknownKey {
  readonly kind: 'unknown';
  readonly device: DeviceName;
  readonly storageId: number;
  readonly allocationId: number;
}

export type TimelineKey = TensorKey | UnknownKey;

export function compareKeys(a: TensorKey, b: TensorKey): number {
  return a.id - b.id || a.allocationId - b.allocationId || (a.device < b.device ? -1 : a.device > b.device ? 1 : 0);
}

/** Interns TensorKeys by storage. */
export class KeyTable {
  private readonly byStorage = new Map<number, TensorKey>();

  fromMeta(t: TensorMeta | null | undefined): TensorKey | null {
    if (!t || t.id < 0) return null;
    return this.intern(t.id, t.allocationId, t.storageId, t.device);
  }

  fromAllocation(a: AllocationEvent): TensorKey | null {
    return a.id === null ? null : this.intern(a.id, a.allocationId, a.storageId, a.device);
  }

  private intern(id: number, allocationId: number, storageId: number, device: DeviceName): TensorKey {
    let key = this.byStorage.get(storageId);
    if (!key) {
      key = new TensorKey(id, allocationId, storageId, device);
      this.byStorage.set(storageId, key);
    }
    return key;
  }
}

/** (key, version) pairs as a set. */
class VersionSet {
  private readonly items = new Map<string, [TensorKey, number]>();
  static id(key: TensorKey, version: number): string {
    return `${key.storageId}#${version}`;
  }
  add(key: TensorKey, version: number): void {
    this.items.set(VersionSet.id(key, version), [key, version]);
  }
  has(key: TensorKey, version: number): boolean {
    return this.items.has(VersionSet.id(key, version));
  }
  delete(key: TensorKey, version: number): void {
    this.items.delete(VersionSet.id(key, version));
  }
  get size(): number {
    return this.items.size;
  }
  values(): IterableIterator<[TensorKey, number]> {
    return this.items.values();
  }
  sorted(): [TensorKey, number][] {
    return [...this.items.values()].sort((a, b) => compareKeys(a[0], b[0]) || a[1] - b[1]);
  }
}

// ---- Parameters and gradients from layer / optimizer / gradient events -------

/**
 * (parameter, gradient) pairs an event reveals (PyTorch's
 * `_extract_parameters_and_gradients`). Gradient events know which tensor was
 * differentiated, but — like AccumulateGrad — do not make it a parameter: a
 * tf.grads input may be any tensor.
 */
function* parametersAndGradients(
  e: ProfileEvent,
  keys: KeyTable,
): Generator<{ param: TensorKey | null; grad: TensorKey | null; paramIsParameter: boolean }> {
  if (e.kind === 'gradient') {
    for (const p of e.pairs) yield { param: keys.fromMeta(p.x), grad: keys.fromMeta(p.grad), paramIsParameter: false };
  } else if (e.kind === 'module' || e.kind === 'optimizer') {
    for (const p of e.parameters) yield { param: keys.fromMeta(p.param), grad: keys.fromMeta(p.grad), paramIsParameter: true };
  }
}

// ---- OpTree ----------------------------------------------------------------

export class OpTree {
  readonly sortedNodes: readonly ProfileEvent[];
  constructor(readonly roots: readonly ProfileEvent[]) {
    this.sortedNodes = [...this.dfs()].sort((a, b) => a.startSeq - b.startSeq);
  }
  dfs(childrenOf?: (e: ProfileEvent) => readonly ProfileEvent[]): Generator<ProfileEvent> {
    return traverseDfs(this.roots, childrenOf);
  }
}

// ---- SizeMap -----------------------------------------------------------------

export class SizeMap {
  private readonly values = new Map<TensorKey, number>();

  constructor(opTree: OpTree, keys: KeyTable) {
    const note = (t: TensorMeta | null | undefined) => {
      const key = keys.fromMeta(t);
      if (key && t) this.values.set(key, Math.max(this.values.get(key) ?? 0, t.bytes));
    };
    for (const e of opTree.sortedNodes) {
      if (e.kind === 'op') {
        for (const t of e.inputs ?? []) note(t);
        for (const t of e.outputs ?? []) note(t);
      } else if (e.kind === 'module') {
        for (const p of e.parameters) (note(p.param), note(p.grad));
      } else if (e.kind === 'optimizer') {
        for (const p of e.parameters) (note(p.param), note(p.grad));
        for (const t of e.state) note(t);
      } else if (e.kind === 'gradient') {
        for (const p of e.pairs) (note(p.x), note(p.grad));
      } else if (e.kind === 'assign') {
        note(e.variable);
      }
    }
    // Allocation events are the ground truth for a storage's size.
    const allocations = new Map<TensorKey, number>();
    for (const e of opTree.sortedNodes) {
      if (e.kind !== 'allocation') continue;
      const key = keys.fromAllocation(e);
      if (!key) continue;
      const size = Math.abs(e.allocSize);
      const prior = allocations.get(key);
      if (prior === undefined) allocations.set(key, size);
      else if (prior !== size) {
        throw new MemscopeError('memory-profile-invalid', `storage ${key.storageId}: allocated with ${prior} B but freed with ${size} B`);
      }
    }
    for (const [k, v] of allocations) this.values.set(k, v);
  }

  get(key: TensorKey): number {
    const v = this.values.get(key);
    if (v === undefined) throw new MemscopeError('memory-profile-invalid', `no size known for ${key}`);
    return v;
  }
}

// ---- Data flow -------------------------------------------------------------

export class DataFlowEdge {
  /** null: this node allocated the storage. */
  inputVersion: number | null = null;
  /** null: this node freed the storage. */
  mutated: boolean | null = false;
  get isAllocation(): boolean {
    return this.inputVersion === null;
  }
  get isDeletion(): boolean {
    return this.mutated === null;
  }
}

export class DataFlowNode {
  readonly edges: ReadonlyMap<TensorKey, DataFlowEdge>;

  constructor(
    readonly event: ProfileEvent,
    graph: DataFlowGraph,
    keys: KeyTable,
  ) {
    this.edges = this.determineEdges(graph, keys);
    for (const [key, edge] of this.edges) if (edge.mutated && !edge.isAllocation) graph.bump(key);
    for (const [key, version] of this.outputs) {
      if (graph.lookup(key) !== version) {
        throw new MemscopeError('memory-profile-invalid', `${event.name}: version of ${key} is ${graph.lookup(key)}, expected ${version}`);
      }
    }
  }

  private determineEdges(graph: DataFlowGraph, keys: KeyTable): Map<TensorKey, DataFlowEdge> {
    const subtree = [...traverseDfs([this.event])];
    const mutableByKey = new Map<TensorKey, Set<boolean | null>>();
    const noteInput = (key: TensorKey | null, mutable: boolean | null) => {
      if (!key) return;
      let set = mutableByKey.get(key);
      if (!set) mutableByKey.set(key, (set = new Set()));
      set.add(mutable);
    };
    for (const e of subtree) {
      // TFJS kernels never write their inputs: every input is immutable.
      if (e.kind === 'op') for (const t of e.inputs ?? []) noteInput(keys.fromMeta(t), false);
      // `Variable.assign` is the one mutation: the storage now holding the variable gets a new version.
      else if (e.kind === 'assign') noteInput(keys.fromMeta(e.variable), true);
    }
    const edges = new Map<TensorKey, DataFlowEdge>();
    const edge = (key: TensorKey) => {
      let found = edges.get(key);
      if (!found) edges.set(key, (found = new DataFlowEdge()));
      return found;
    };
    for (const [key, set] of mutableByKey) {
      const ed = edge(key);
      ed.inputVersion = graph.lookup(key);
      ed.mutated = set.has(true) || (set.size === 1 && set.has(null));
    }
    // A free implicitly reads the storage.
    for (const e of subtree) {
      if (e.kind !== 'allocation' || e.isAllocation) continue;
      const key = keys.fromAllocation(e);
      if (!key) continue;
      const ed = edge(key);
      if (ed.mutated === null) throw new MemscopeError('memory-profile-invalid', `double free of ${key}`);
      ed.mutated = null;
      ed.inputVersion = graph.lookup(key);
    }
    // Last, because the passes above optimistically added input edges.
    for (const e of subtree) {
      if (e.kind !== 'allocation' || !e.isAllocation) continue;
      const key = keys.fromAllocation(e);
      if (key) edge(key).inputVersion = null;
    }
    return new Map([...edges.entries()].sort((a, b) => compareKeys(a[0], b[0])));
  }

  /** key → [mutated, version read]. */
  get inputs(): Map<TensorKey, [boolean, number]> {
    const out = new Map<TensorKey, [boolean, number]>();
    for (const [k, v] of this.edges) if (!v.isAllocation) out.set(k, [Boolean(v.mutated), v.inputVersion!]);
    return out;
  }

  /** key → version written. */
  get outputs(): Map<TensorKey, number> {
    const out = new Map<TensorKey, number>();
    for (const [k, v] of this.edges) {
      if ((v.isAllocation && !v.isDeletion) || v.mutated) out.set(k, v.inputVersion === null ? 0 : v.inputVersion + 1);
    }
    return out;
  }

  /** Storages allocated and freed within this node (PyTorch's TEMPORARY). */
  get intermediates(): TensorKey[] {
    return [...this.edges].filter(([, v]) => v.isAllocation && v.isDeletion).map(([k]) => k);
  }

  get startSeq(): number {
    return this.event.startSeq;
  }

  get inBackward(): boolean {
    return inBackward(this.event);
  }

  /** Inside a recorded optimizer step (applyGradients). */
  get inOptimizerStep(): boolean {
    for (let e: ProfileEvent | null = this.event; e; e = e.parent) if (e.kind === 'optimizer') return true;
    return false;
  }
}

export class DataFlowGraph {
  readonly leafEvents: readonly ProfileEvent[];
  readonly flowNodes: readonly DataFlowNode[];
  private readonly activeVersion = new Map<TensorKey, number>();

  constructor(opTree: OpTree, keys: KeyTable) {
    this.leafEvents = DataFlowGraph.extractLeafEvents(opTree);
    const nodes = this.leafEvents.map((e) => new DataFlowNode(e, this, keys));
    nodes.sort((a, b) => a.startSeq - b.startSeq);
    this.flowNodes = nodes;
    this.validate();
  }

  /** Keys the graph has seen (PyTorch tests read `_active_version`). */
  get keys(): TensorKey[] {
    return [...this.activeVersion.keys()];
  }

  /**
   * The topmost events that are kernels, backward closures (a gradient
   * closure's tidy, or a 'backward' scope holding no other), variable
   * assigns, or allocations outside them: the nodes of the data-flow graph. PyTorch selects the
   * topmost ops that match an operator schema; every TFJS kernel qualifies
   * (its inputs are known to be read-only), scopes never do.
   */
  static extractLeafEvents(opTree: OpTree): ProfileEvent[] {
    const hasNestedBackward = new Set<ProfileEvent>();
    for (const e of opTree.sortedNodes) {
      if (e.kind === 'op' && e.opKind === 'backward') {
        for (let p = e.parent; p; p = p.parent) if (p.kind === 'op' && p.opKind === 'backward') hasNestedBackward.add(p);
      }
    }
    const isLeafOp = (e: ProfileEvent) =>
      e.kind === 'op' &&
      (e.opKind === 'kernel' || e.role === 'backward-closure' || (e.opKind === 'backward' && !hasNestedBackward.has(e)));
    const leaves: ProfileEvent[] = [];
    for (const _ of opTree.dfs((e) => {
      if (isLeafOp(e) || e.kind === 'allocation' || e.kind === 'assign') {
        leaves.push(e);
        return [];
      }
      return e.children;
    })) {
      // Traversal only.
    }
    return leaves.sort((a, b) => a.startSeq - b.startSeq);
  }

  lookup(key: TensorKey): number {
    let v = this.activeVersion.get(key);
    if (v === undefined) this.activeVersion.set(key, (v = 0));
    return v;
  }

  bump(key: TensorKey): void {
    const prior = this.activeVersion.get(key);
    if (prior === undefined) throw new MemscopeError('memory-profile-invalid', `version bump of unseen ${key}`);
    this.activeVersion.set(key, prior + 1);
  }

  private validate(): void {
    const outputs = new VersionSet();
    for (const node of this.flowNodes) {
      for (const [key, version] of node.outputs) {
        if (outputs.has(key, version)) {
          throw new MemscopeError('memory-profile-invalid', `${node.event.name}: ${key} v${version} is created twice`);
        }
        outputs.add(key, version);
      }
    }
    const versions = new Map<TensorKey, number>();
    for (const node of this.flowNodes) {
      for (const [key, [, version]] of node.inputs) {
        const expected = versions.get(key) ?? 0;
        if (expected !== version) {
          throw new MemscopeError('memory-profile-invalid', `${node.event.name}: reads ${key} v${version}, expected v${expected}`);
        }
      }
      for (const [key, version] of node.outputs) {
        const prior = versions.get(key) ?? version;
        if (version < prior) throw new MemscopeError('memory-profile-invalid', `${node.event.name}: ${key} goes back to v${version}`);
        versions.set(key, version);
      }
    }
  }
}

// ---- Categories ----------------------------------------------------------------

class CategoryElement {
  byId: Category | null = null;
  readonly byKey = new Map<TensorKey, Category>();
  readonly byVersion = new Map<string, Category>();
  /** Keys that were categorised by id (they join the snapshot at v0). */
  readonly byIdKeys = new Set<TensorKey>();
}

export class CategoryDict {
  readonly values = new Map<number, CategoryElement>();

  private element(id: number): CategoryElement {
    let e = this.values.get(id);
    if (!e) this.values.set(id, (e = new CategoryElement()));
    return e;
  }

  setById(key: TensorKey, category: Category): void {
    const e = this.element(key.id);
    e.byId = category;
    e.byIdKeys.add(key);
  }

  setByKey(key: TensorKey, category: Category): void {
    this.element(key.id).byKey.set(key, category);
  }

  setByVersion(key: TensorKey, version: number, category: Category): void {
    this.element(key.id).byVersion.set(VersionSet.id(key, version), category);
  }

  setDefaultByVersion(key: TensorKey, version: number, category: Category): void {
    const e = this.element(key.id);
    const id = VersionSet.id(key, version);
    if (!e.byVersion.has(id)) e.byVersion.set(id, category);
  }

  get(key: TimelineKey, version: number): Category | null {
    if (key.kind !== 'tensor') return null;
    const e = this.values.get(key.id);
    if (!e) return null;
    return e.byId ?? e.byKey.get(key) ?? e.byVersion.get(VersionSet.id(key, version)) ?? null;
  }
}

export type TimelineEntry = readonly [time: number, action: Action, keyAndVersion: readonly [TimelineKey, number], bytes: number];

export class MemoryProfile {
  readonly opTree: OpTree;
  readonly dataFlowGraph: DataFlowGraph;
  readonly sizeMap: SizeMap;
  readonly categories = new CategoryDict();
  private readonly keys = new KeyTable();
  private timelineCache: readonly TimelineEntry[] | null = null;

  constructor(readonly recording: RecordedProfile) {
    this.opTree = new OpTree(recording.roots);
    this.dataFlowGraph = new DataFlowGraph(this.opTree, this.keys);
    this.sizeMap = new SizeMap(this.opTree, this.keys);
    this.setGradientsAndTemporaries();
    this.setParametersUsingLayerAndOptimizerEvents();
    this.setInputs();
    this.setParametersUsingDataFlow();
    this.setActivations();
    this.setOptimizerState();
    this.setAutogradDetail();
  }

  /** The key of a recorded tensor observation (for lookups and formatting). */
  keyOf(t: TensorMeta | null | undefined): TensorKey | null {
    return this.keys.fromMeta(t);
  }

  /** The key of the storage a framework tensor (by its id) was last seen on, or null if never seen. */
  keyOfTensor(tensorId: number): TensorKey | null {
    return this.keys.fromMeta(this.recording.tensors.get(tensorId));
  }

  /** (param, grad) pairs an event reveals, as keys (PyTorch's `extract_gradients`). */
  extractGradients(e: ProfileEvent): { param: TensorKey | null; grad: TensorKey }[] {
    const out: { param: TensorKey | null; grad: TensorKey }[] = [];
    for (const p of parametersAndGradients(e, this.keys)) if (p.grad) out.push({ param: p.param, grad: p.grad });
    return out;
  }

  /** Parameters a layer or optimizer event reveals (PyTorch's `extract_parameters`). */
  extractParameters(e: ProfileEvent): TensorKey[] {
    const out: TensorKey[] = [];
    for (const p of parametersAndGradients(e, this.keys)) if (p.paramIsParameter && p.param) out.push(p.param);
    return out;
  }

  /**
   * (time ns, action, (key, version), bytes), sorted by time then action.
   * PREEXISTING entries have time -1.
   */
  get timeline(): readonly TimelineEntry[] {
    return (this.timelineCache ??= this.buildTimeline());
  }

  private buildTimeline(): TimelineEntry[] {
    const output: TimelineEntry[] = [];
    const allocationTimes = new Map<string, number>();
    const liveUnknown = new Set<string>();
    for (const e of this.opTree.dfs()) {
      if (e.kind !== 'allocation') continue;
      const t = e.startNs;
      const key = this.keys.fromAllocation(e);
      if (key) {
        allocationTimes.set(`${key.storageId}:${e.isAllocation}`, t);
        continue;
      }
      const unknown: UnknownKey = { kind: 'unknown', device: e.device, storageId: e.storageId, allocationId: e.allocationId };
      const where = `${e.device}:${e.storageId}`;
      if (e.isAllocation) {
        if (liveUnknown.has(where)) output.push([t, 'INCREMENT_VERSION', [unknown, 0], e.allocSize]);
        else {
          liveUnknown.add(where);
          output.push([t, 'CREATE', [unknown, 0], e.allocSize]);
        }
      } else {
        output.push([t, 'DESTROY', [unknown, 0], -e.allocSize]);
        if (!liveUnknown.delete(where)) output.push([-1, 'PREEXISTING', [unknown, 0], -e.allocSize]);
      }
    }

    const snapshot = this.categorySnapshot();
    const lastVersion = new Map<TensorKey, number>();
    for (const [key, version] of snapshot.keys) lastVersion.set(key, Math.max(lastVersion.get(key) ?? 0, version));

    const events: [number, Action, TensorKey, number][] = [];
    for (const [key, version] of snapshot.keys) {
      if (version === 0 && !allocationTimes.has(`${key.storageId}:true`)) events.push([-1, 'PREEXISTING', key, 0]);
    }
    for (const node of this.dataFlowGraph.flowNodes) {
      for (const [key, edge] of node.edges) {
        if (edge.isAllocation) events.push([allocationTimes.get(`${key.storageId}:true`)!, 'CREATE', key, 0]);
        else if (edge.mutated) events.push([node.event.startNs, 'INCREMENT_VERSION', key, edge.inputVersion!]);
        if (edge.isDeletion) events.push([allocationTimes.get(`${key.storageId}:false`)!, 'DESTROY', key, lastVersion.get(key)!]);
      }
    }
    for (const [time, action, key, version] of events) output.push([time, action, [key, version], this.sizeMap.get(key)]);
    // Stable: equal (time, action) keep the order above, as in PyTorch.
    return output
      .map((entry, i) => ({ entry, i }))
      .sort((a, b) => a.entry[0] - b.entry[0] || ACTION_INDEX[a.entry[1]] - ACTION_INDEX[b.entry[1]] || a.i - b.i)
      .map(({ entry }) => entry);
  }

  /** Every (key, version) the analysis knows, sorted, with its category. */
  categorySnapshot(): { keys: [TensorKey, number][]; categories: (Category | null)[] } {
    const all = new VersionSet();
    for (const node of this.dataFlowGraph.flowNodes) {
      for (const [k, [, v]] of node.inputs) all.add(k, v);
      for (const k of node.intermediates) all.add(k, 0);
      for (const [k, v] of node.outputs) all.add(k, v);
    }
    for (const element of this.categories.values.values()) for (const k of element.byIdKeys) all.add(k, 0);
    const keys = all.sorted();
    return { keys, categories: keys.map(([k, v]) => this.categories.get(k, v)) };
  }

  private snapshotSet(wanted: (c: Category | null) => boolean): VersionSet {
    const out = new VersionSet();
    const { keys, categories } = this.categorySnapshot();
    keys.forEach(([k, v], i) => wanted(categories[i]!) && out.add(k, v));
    return out;
  }

  private isGradient(key: TensorKey, version: number): boolean {
    return this.categories.get(key, version) === 'GRADIENT';
  }

  /**
   * Ids of tensors any version of which depends on a gradient. Dependency may
   * flow backward through edges here (a parameter's v0 is caught because its
   * v1 depends on a gradient), so iterate to a fixed point.
   */
  private anyVersionDependsOnGradient(): Set<number> {
    const depends = new Set<number>();
    for (;;) {
      const before = depends.size;
      for (const node of this.dataFlowGraph.flowNodes) {
        const ids: number[] = [];
        for (const [key, [, version]] of node.inputs) {
          const c = this.categories.get(key, version);
          if (c === 'GRADIENT' || c === 'PARAMETER' || depends.has(key.id)) ids.push(key.id);
        }
        if (ids.length > 0) {
          for (const id of ids) depends.add(id);
          for (const key of node.outputs.keys()) depends.add(key.id);
        }
      }
      if (depends.size === before) return depends;
    }
  }

  private setGradientsAndTemporaries(): void {
    for (const e of this.opTree.dfs()) for (const { grad } of this.extractGradients(e)) this.categories.setById(grad, 'GRADIENT');
    for (const node of this.dataFlowGraph.flowNodes) for (const k of node.intermediates) this.categories.setByKey(k, 'TEMPORARY');
  }

  private setParametersUsingLayerAndOptimizerEvents(): void {
    for (const e of this.opTree.dfs()) for (const p of this.extractParameters(e)) this.categories.setById(p, 'PARAMETER');
  }

  /** Inputs: tensors that contribute to a gradient but never depend on one (and are not made in backward). */
  private setInputs(): void {
    const dependsOnGradient = this.anyVersionDependsOnGradient();
    const producesGradient = new VersionSet();
    const nodes = this.dataFlowGraph.flowNodes;
    for (let i = nodes.length - 1; i >= 0; i--) {
      const node = nodes[i]!;
      const tensors = new VersionSet();
      for (const [k, [, v]] of node.inputs) tensors.add(k, v);
      for (const [k, v] of node.outputs) tensors.add(k, v);
      const hit = [...tensors.values()].some(([k, v]) => {
        const c = this.categories.get(k, v);
        return c === 'GRADIENT' || c === 'PARAMETER' || producesGradient.has(k, v);
      });
      if (hit) for (const [k, v] of tensors.values()) producesGradient.add(k, v);
    }
    const candidates = producesGradient;
    // Tensors made in backward are autograd details, not inputs. TFJS
    // optimizers also make tensors (their scalar hyper-parameters, their
    // arithmetic, which PyTorch does in place) inside a recorded step: not
    // inputs either.
    for (const node of nodes) if (node.inBackward || node.inOptimizerStep) for (const [k, v] of node.outputs) candidates.delete(k, v);
    for (const [k, v] of candidates.values()) if (!dependsOnGradient.has(k.id)) this.categories.setDefaultByVersion(k, v, 'INPUT');
  }

  /**
   * Fallback when no layer/optimizer event named a parameter: a parameter is
   * read in the forward pass by nodes that depend on an input, contributes to
   * a gradient, and (some version of it) depends on a gradient.
   */
  private setParametersUsingDataFlow(): void {
    const { keys } = this.categorySnapshot();
    const candidateParameters = new VersionSet();
    const candidateFwd = this.snapshotSet((c) => c === 'INPUT');
    for (const node of this.dataFlowGraph.flowNodes) {
      const inputs = [...node.inputs].map(([k, [, v]]) => [k, v] as [TensorKey, number]);
      if (
        // A parameter is read in the forward pass: skip backward, and (TFJS)
        // recorded optimizer steps, whose out-of-place arithmetic would
        // otherwise pass for a forward pass over optimizer temporaries.
        !node.inBackward &&
        !node.inOptimizerStep &&
        !inputs.some(([k, v]) => this.isGradient(k, v)) &&
        ![...node.outputs].some(([k, v]) => this.isGradient(k, v)) &&
        inputs.some(([k, v]) => candidateFwd.has(k, v))
      ) {
        for (const [k, v] of node.outputs) candidateFwd.add(k, v);
        for (const [k, v] of inputs) if (!candidateFwd.has(k, v)) candidateParameters.add(k, v);
      }
    }
    const usedForGradient = new VersionSet();
    const nodes = this.dataFlowGraph.flowNodes;
    for (let i = nodes.length - 1; i >= 0; i--) {
      const node = nodes[i]!;
      if ([...node.outputs].some(([k, v]) => this.isGradient(k, v) || usedForGradient.has(k, v))) {
        for (const [k, [, v]] of node.inputs) usedForGradient.add(k, v);
      }
    }
    const parameterIds = new Set<number>();
    for (const [k, v] of candidateParameters.values()) if (usedForGradient.has(k, v)) parameterIds.add(k.id);
    const dependsOnGradient = this.anyVersionDependsOnGradient();
    for (const id of [...parameterIds]) if (!dependsOnGradient.has(id)) parameterIds.delete(id);
    for (const [k] of keys) if (parameterIds.has(k.id)) this.categories.setById(k, 'PARAMETER');
  }

  /** Flood forward from inputs and activations, through parameters and temporaries, stopping at backward. */
  private setActivations(): void {
    const required = new Set<Category | null>(['INPUT', 'ACTIVATION']);
    const allowed = new Set<Category | null>(['INPUT', 'ACTIVATION', 'PARAMETER', 'TEMPORARY']);
    for (const node of this.dataFlowGraph.flowNodes) {
      const cats = new Set([...node.inputs].map(([k, [, v]]) => this.categories.get(k, v)));
      const hasRequired = [...cats].some((c) => required.has(c));
      const onlyAllowed = [...cats].every((c) => allowed.has(c));
      if (hasRequired && onlyAllowed && !node.inBackward) {
        for (const [k, v] of node.outputs) this.categories.setDefaultByVersion(k, v, 'ACTIVATION');
      }
    }
  }

  private setOptimizerState(): void {
    for (const e of this.opTree.dfs()) {
      if (e.kind !== 'optimizer') continue;
      for (const t of e.state) {
        const key = this.keys.fromMeta(t);
        if (key) this.categories.setById(key, 'OPTIMIZER_STATE');
      }
    }
  }

  private setAutogradDetail(): void {
    for (const node of this.dataFlowGraph.flowNodes) {
      if (!node.inBackward) continue;
      for (const [k, v] of node.outputs) {
        const prior = v === 0 ? null : this.categories.get(k, v - 1);
        if (v === 0 || prior === null || prior === 'AUTOGRAD_DETAIL') this.categories.setDefaultByVersion(k, v, 'AUTOGRAD_DETAIL');
      }
    }
  }
}
