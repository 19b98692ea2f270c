/**
 * A flame graph as plain columns for a page to draw, zoom and search: the merged tree of
 * `buildFlameTree` flattened in pre-order (each node followed by its subtree; siblings in name
 * order, as flamegraph.pl and the SVG draw them), with each node's offset along the root so a
 * viewer needs no tree of objects. Framework-free.
 */
import type { FlameNode } from './flamegraph-svg.js';

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
 * Flattens a flame tree. Nodes lighter than `minFraction` of the root are left out (at most a
 * pixel on any screen at full view; zooming shows their parent's full width), which bounds the
 * page's data for snapshots with hundreds of thousands of distinct stacks.
 */
export function flameGraphData(root: FlameNode, title: string, unit: string, minFraction = 1e-6): FlameGraphData {
  const names: string[] = [];
  const ids = new Map<string, number>();
  const out: FlameGraphData = { title, unit, names, name: [], depth: [], value: [], offset: [], dropped: 0 };
  const min = root.value * minFraction;
  let dropped = 0;
  const todo: { node: FlameNode; depth: number; offset: number }[] = [{ node: root, depth: 0, offset: 0 }];
  while (todo.length > 0) {
    const { node, depth, offset } = todo.pop()!;
    let id = ids.get(node.name);
    if (id === undefined) {
      id = names.length;
      names.push(node.name);
      ids.set(node.name, id);
    }
    out.name.push(id);
    out.depth.push(depth);
    out.value.push(node.value);
    out.offset.push(offset);
    const children = [...node.children.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    const placed: { node: FlameNode; depth: number; offset: number }[] = [];
    let x = offset;
    for (const c of children) {
      if (c.value >= min && c.value > 0) placed.push({ node: c, depth: depth + 1, offset: x });
      else dropped++;
      x += c.value;
    }
    // Reversed onto the stack so the first sibling comes out first (pre-order, name order).
    for (let k = placed.length - 1; k >= 0; k--) todo.push(placed[k]!);
  }
  return { ...out, dropped };
}
