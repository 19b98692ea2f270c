/**
 * A flame graph as plain columns for a page to draw, zoom and search: weighted stacks merged into
 * a tree (as `buildFlameTree` merges them for the SVG) and flattened in pre-order (each node
 * followed by its subtree; siblings in name order, as flamegraph.pl and the SVG draw them), with
 * each node's offset along the root, so a viewer needs no tree of objects. Framework-free.
 */
import type { FlameStack } from './flamegraph-svg.js';

export interface FlameGraphData {
  readonly title: string;
  /** What a node's width is, for the page's status line ("bytes (requested)"). */
  readonly unit: string;
  /** Frame names; `name[i]` indexes them. */
  readonly names: string[];
  readonly name: number[];
  readonly depth: number[];
  /** Weight of the node (its subtree's stacks). */
  readonly value: number[];
  /** Weight of the siblings before it and of its ancestors' siblings before them: its left edge. */
  readonly offset: number[];
  /** Subtrees under `minFraction` of the root that were left out (their weight stays in their parent). */
  readonly dropped: number;
}

/**
 * Merges weighted stacks and flattens the merged tree. Nodes lighter than `minFraction` of the
 * root are left out (at most a pixel on any screen at full view; zooming shows their parent's
 * full width), which bounds the page's data for snapshots with hundreds of thousands of distinct
 * stacks.
 *
 * The tree is held as columns while it is merged — a node is its frame, parent and weight, found
 * from (parent, frame) in one open-addressing table — not as an object with a Map of children per
 * node: a 1 GB snapshot's segments graph has four million nodes, which as objects took 1.5 GB of
 * heap for a moment while the page opened the file (about 40 bytes a node here).
 */
export function flameGraphData(stacks: Iterable<FlameStack>, title: string, unit: string, options: { rootLabel?: string; minFraction?: number } = {}): FlameGraphData {
  const tree = new FlameColumns(options.rootLabel ?? 'all');
  for (const s of stacks) if (s.weight > 0) tree.add(s.frames, s.weight);
  return tree.flatten(title, unit, options.minFraction ?? 1e-6);
}

/** The merged tree, a node per index: node 0 is the root. */
class FlameColumns {
  private readonly frames: string[] = [];
  private readonly frameIds = new Map<string, number>();
  private frame = new Int32Array(1024);
  private parent = new Int32Array(1024);
  private value = new Float64Array(1024);
  count = 1;
  private readonly children = new ChildTable();

  constructor(rootLabel: string) {
    this.frame[0] = this.frameId(rootLabel);
    this.parent[0] = -1;
  }

  private frameId(name: string): number {
    let id = this.frameIds.get(name);
    if (id === undefined) {
      id = this.frames.length;
      this.frames.push(name);
      this.frameIds.set(name, id);
    }
    return id;
  }

  add(frames: readonly string[], weight: number): void {
    this.value[0] += weight;
    let node = 0;
    for (const f of frames) {
      const id = this.frameId(f);
      let child = this.children.get(node, id);
      if (child < 0) {
        child = this.newNode(node, id);
        this.children.set(node, id, child);
      }
      this.value[child] += weight;
      node = child;
    }
  }

  private newNode(parent: number, frame: number): number {
    if (this.count === this.frame.length) {
      const grow = <T extends Int32Array | Float64Array>(a: T): T => {
        const b = new (a.constructor as new (n: number) => T)(a.length * 2);
        b.set(a);
        return b;
      };
      this.frame = grow(this.frame);
      this.parent = grow(this.parent);
      this.value = grow(this.value);
    }
    const k = this.count++;
    this.frame[k] = frame;
    this.parent[k] = parent;
    this.value[k] = 0;
    return k;
  }

  /** Pre-order, each node followed by its subtree, siblings in name order (as flamegraph.pl draws them). */
  flatten(title: string, unit: string, minFraction: number): FlameGraphData {
    const { count, frame, parent, value, frames } = this;
    // Each node's children, in one array: node k's are kids[first[k] .. first[k + 1]).
    const first = new Int32Array(count + 1);
    for (let k = 1; k < count; k++) first[parent[k]! + 1]++;
    for (let k = 0; k < count; k++) first[k + 1] += first[k]!;
    const kids = new Int32Array(Math.max(0, count - 1));
    const fill = first.slice(0, count);
    for (let k = 1; k < count; k++) kids[fill[parent[k]!]!++] = k;

    const names: string[] = [];
    const nameOf = new Int32Array(frames.length).fill(-1);
    const out = { title, unit, names, name: [] as number[], depth: [] as number[], value: [] as number[], offset: [] as number[], dropped: 0 };
    const min = value[0]! * minFraction;
    const byName = (a: number, b: number): number => {
      const x = frames[frame[a]!]!;
      const y = frames[frame[b]!]!;
      return x < y ? -1 : x > y ? 1 : 0;
    };
    const todoNode: number[] = [0];
    const todoDepth: number[] = [0];
    const todoOffset: number[] = [0];
    while (todoNode.length > 0) {
      const node = todoNode.pop()!;
      const depth = todoDepth.pop()!;
      const offset = todoOffset.pop()!;
      const f = frame[node]!;
      if (nameOf[f] === -1) {
        nameOf[f] = names.length;
        names.push(frames[f]!);
      }
      out.name.push(nameOf[f]!);
      out.depth.push(depth);
      out.value.push(value[node]!);
      out.offset.push(offset);
      const children = Array.from(kids.subarray(first[node]!, first[node + 1]!)).sort(byName);
      const placed: number[] = [];
      const placedAt: number[] = [];
      let x = offset;
      for (const c of children) {
        if (value[c]! >= min && value[c]! > 0) {
          placed.push(c);
          placedAt.push(x);
        } else out.dropped++;
        x += value[c]!;
      }
      // Reversed onto the stack so the first sibling comes out first.
      for (let k = placed.length - 1; k >= 0; k--) {
        todoNode.push(placed[k]!);
        todoDepth.push(depth + 1);
        todoOffset.push(placedAt[k]!);
      }
    }
    return out;
  }
}

/** (parent node, frame) → child node: open addressing over numeric keys, insert only. */
class ChildTable {
  private keys = new Float64Array(1 << 12).fill(-1);
  private vals = new Int32Array(1 << 12);
  private size = 0;

  /** One number per (parent, frame): exact while parent · 2^26 + frame stays below 2^53. */
  private static key(parent: number, frame: number): number {
    return parent * 67108864 + frame;
  }

  private slot(key: number): number {
    const mask = this.keys.length - 1;
    let i = Math.imul((key >>> 0) ^ Math.imul((key / 4294967296) >>> 0, 0x85ebca6b), 0x9e3779b1) >>> 0;
    for (i &= mask; ; i = (i + 1) & mask) {
      const k = this.keys[i]!;
      if (k === key || k === -1) return i;
    }
  }

  get(parent: number, frame: number): number {
    const i = this.slot(ChildTable.key(parent, frame));
    return this.keys[i] === -1 ? -1 : this.vals[i]!;
  }

  set(parent: number, frame: number, child: number): void {
    const key = ChildTable.key(parent, frame);
    const i = this.slot(key);
    this.keys[i] = key;
    this.vals[i] = child;
    if (++this.size * 2 > this.keys.length) this.grow();
  }

  private grow(): void {
    const keys = this.keys;
    const vals = this.vals;
    this.keys = new Float64Array(keys.length * 2).fill(-1);
    this.vals = new Int32Array(keys.length * 2);
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === -1) continue;
      const j = this.slot(keys[i]!);
      this.keys[j] = keys[i]!;
      this.vals[j] = vals[i]!;
    }
  }
}
