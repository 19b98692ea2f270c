import { escapeXml } from './escape.js';
import { humanBytes } from '../core/units.js';

/**
 * A flame graph drawn as a standalone SVG, without flamegraph.pl or any
 * script: stacks (root first) with weights are merged into a tree; the root
 * sits at the bottom, each frame's width is its share of the total weight,
 * siblings are in name order (as flamegraph.pl draws them), and every box
 * carries a <title> tooltip with its full name and weight. All text is escaped.
 */

export interface FlameStack {
  /** Frames from the root (outermost) to the leaf. */
  readonly frames: readonly string[];
  /** Weight of the leaf (bytes for memory graphs); non-positive weights are ignored. */
  readonly weight: number;
}

export interface FlameGraphOptions {
  readonly title: string;
  /** A line under the title (what the weights are, totals). */
  readonly subtitle?: string;
  /** Unit name for tooltips when `formatWeight` is not given. */
  readonly countName?: string;
  readonly formatWeight?: (weight: number) => string;
  /** Label of the bottom frame that spans everything. */
  readonly rootLabel?: string;
  readonly width?: number;
  readonly frameHeight?: number;
  /** Frames narrower than this many pixels are not drawn (their weight stays in the parent). */
  readonly minWidth?: number;
  /** Fill colour of a frame; defaults to flamegraph.pl-like warm colours keyed by name. */
  readonly colorFor?: (frame: string, depth: number, path: readonly string[]) => string;
}

export interface FlameNode {
  readonly name: string;
  value: number;
  readonly children: Map<string, FlameNode>;
}

/** Merges stacks into a tree whose root is the sum of all weights. */
export function buildFlameTree(stacks: Iterable<FlameStack>, rootLabel = 'all'): FlameNode {
  const root: FlameNode = { name: rootLabel, value: 0, children: new Map() };
  for (const s of stacks) {
    if (!(s.weight > 0)) continue;
    root.value += s.weight;
    let node = root;
    for (const f of s.frames) {
      let child = node.children.get(f);
      if (!child) {
        child = { name: f, value: 0, children: new Map() };
        node.children.set(f, child);
      }
      child.value += s.weight;
      node = child;
    }
  }
  return root;
}

function depthOf(node: FlameNode): number {
  let d = 0;
  for (const c of node.children.values()) d = Math.max(d, depthOf(c) + 1);
  return d;
}

/** Deterministic warm colour from a name (flamegraph.pl's "hot" palette family). */
export function warmColor(name: string): string {
  let h = 2166136261;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619);
  const v1 = ((h >>> 0) % 1000) / 1000;
  const v2 = ((h >>> 10) % 1000) / 1000;
  const r = 205 + Math.round(50 * v2);
  const g = Math.round(230 * v1);
  const b = Math.round(55 * v2);
  return `rgb(${r},${g},${b})`;
}

const FONT_SIZE = 11;
/** Average advance of the monospace font at FONT_SIZE; used to fit labels in boxes. */
const CHAR_WIDTH = 6.6;

function fitLabel(text: string, widthPx: number): string {
  const fits = Math.floor((widthPx - 6) / CHAR_WIDTH);
  if (fits < 3) return '';
  if (text.length <= fits) return text;
  return text.slice(0, fits - 2) + '..';
}

/** Renders stacks as a flame graph SVG document. */
export function renderFlameGraph(stacks: Iterable<FlameStack>, options: FlameGraphOptions): string {
  const width = options.width ?? 1200;
  const frameHeight = options.frameHeight ?? 16;
  const minWidth = options.minWidth ?? 1;
  const pad = 10;
  const format =
    options.formatWeight ?? ((w: number) => (options.countName === undefined || options.countName === 'bytes' ? humanBytes(w) : `${w} ${options.countName}`));
  const colorFor = options.colorFor ?? ((name: string) => warmColor(name));
  const root = buildFlameTree(stacks, options.rootLabel ?? 'all');
  const depth = depthOf(root) + 1;
  const header = options.subtitle ? 48 : 32;
  const height = header + depth * frameHeight + pad * 2;
  const plotWidth = width - pad * 2;
  const total = root.value;
  const scale = total > 0 ? plotWidth / total : 0;

  const out: string[] = [];
  out.push('<?xml version="1.0" encoding="UTF-8" standalone="no"?>');
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="ui-monospace, Menlo, Consolas, monospace" font-size="${FONT_SIZE}">`,
  );
  out.push(`<title>${escapeXml(options.title)}</title>`);
  out.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fdfdf7"/>`);
  out.push(
    `<text x="${width / 2}" y="20" text-anchor="middle" font-size="15" font-family="system-ui, sans-serif">${escapeXml(options.title)}</text>`,
  );
  if (options.subtitle) {
    out.push(`<text x="${width / 2}" y="38" text-anchor="middle" fill="#555" font-family="system-ui, sans-serif">${escapeXml(options.subtitle)}</text>`);
  }
  if (total <= 0) {
    out.push(`<text x="${width / 2}" y="${header + frameHeight}" text-anchor="middle" fill="#555">(nothing to draw: total weight is 0)</text>`);
    out.push('</svg>');
    return out.join('\n') + '\n';
  }

  let drawn = 0;
  const path: string[] = [];
  const draw = (node: FlameNode, x: number, level: number): void => {
    const w = node.value * scale;
    if (w < minWidth) return;
    const y = height - pad - (level + 1) * frameHeight;
    const pct = ((node.value / total) * 100).toFixed(2);
    const tip = `${node.name} (${format(node.value)}, ${pct}%)`;
    const fill = level === 0 ? '#e0e0e0' : colorFor(node.name, level, path);
    const label = fitLabel(node.name, w);
    out.push(
      `<g><title>${escapeXml(tip)}</title><rect x="${x.toFixed(2)}" y="${y}" width="${w.toFixed(2)}" height="${frameHeight - 1}" rx="2" fill="${escapeXml(fill)}"/>` +
        (label ? `<text x="${(x + 3).toFixed(2)}" y="${y + frameHeight - 5}">${escapeXml(label)}</text>` : '') +
        '</g>',
    );
    drawn++;
    path.push(node.name);
    let cx = x;
    const children = [...node.children.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const c of children) {
      draw(c, cx, level + 1);
      cx += c.value * scale;
    }
    path.pop();
  };
  draw(root, pad, 0);
  out.push(`<desc>${drawn} frames drawn; total ${escapeXml(format(total))}</desc>`);
  out.push('</svg>');
  return out.join('\n') + '\n';
}
