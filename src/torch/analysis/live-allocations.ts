/** Live (active_allocated) memory: the largest allocations, and bytes by allocating frame. */
import { DEFAULT_SITE_RULE, type SiteRule } from '../../core/site-rule.js';
import type { MemorySnapshot } from '../snapshot.js';
import { allocatingFrame, frameLabels } from './frame-labels.js';

export interface LiveAllocation {
  readonly block: number;
  readonly device: number;
  readonly address: number;
  readonly size: number;
  readonly requestedSize: number;
  readonly stream: number;
  /** Informative frames, innermost first (up to the requested count). */
  readonly frames: string[];
  readonly allocatingFrame: string;
}

/** The `n` largest active_allocated blocks, largest first (address breaks ties). */
export function largestAllocations(snapshot: MemorySnapshot, n: number, topFrames = 3, device: number | null = null, site: SiteRule = DEFAULT_SITE_RULE): LiveAllocation[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const rows = largestAllocatedBlocks(snapshot, n, device);
  const l = frameLabels(snapshot, site);
  return rows.map((i) => {
    const seg = snapshot.segments[b.segment[i]!]!;
    return {
      block: i,
      device: seg.device,
      address: b.address[i]!,
      size: b.size[i]!,
      requestedSize: b.requestedSize[i]!,
      stream: seg.stream,
      frames: l.top(b.stack[i]!, topFrames),
      allocatingFrame: l.allocatingFrame(b.stack[i]!),
    };
  });
}

/**
 * Rows of the `n` largest active_allocated blocks, in the order of a stable sort by size
 * (descending) then address. For a small `n`, one pass keeping a short sorted list: `memscope
 * summary` asks for 10 of maybe 100 000, in a fresh process where a sort with a comparator runs
 * mostly unoptimised.
 */
function largestAllocatedBlocks(snapshot: MemorySnapshot, n: number, device: number | null): number[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const size = b.size;
  const address = b.address;
  const rows: number[] = [];
  if (n <= 0) return rows;
  const few = n <= 64;
  for (let i = 0; i < b.count; i++) {
    if (b.state[i] !== allocated) continue;
    if (device !== null && snapshot.segments[b.segment[i]!]!.device !== device) continue;
    if (!few) {
      rows.push(i);
      continue;
    }
    // Insert i after every row that is not smaller (equal size and address: earlier rows first).
    const si = size[i]!;
    const ai = address[i]!;
    let k = rows.length;
    while (k > 0) {
      const j = rows[k - 1]!;
      if (size[j]! > si || (size[j] === si && address[j]! <= ai)) break;
      k--;
    }
    if (k === n) continue;
    rows.splice(k, 0, i);
    if (rows.length > n) rows.pop();
  }
  if (!few) {
    rows.sort((x, y) => size[y]! - size[x]! || address[x]! - address[y]!);
    rows.length = Math.min(rows.length, n);
  }
  return rows;
}

export interface FrameTotal {
  readonly frame: string;
  readonly blocks: number;
  readonly bytes: number;
  readonly requested: number;
}

/** Live (active_allocated) memory grouped by allocating frame (the site), largest first. */
export function totalsByFrame(snapshot: MemorySnapshot, device: number | null = null, site: SiteRule = DEFAULT_SITE_RULE): FrameTotal[] {
  const b = snapshot.blocks;
  const allocated = snapshot.stateNames.indexOf('active_allocated');
  const l = frameLabels(snapshot, site);
  // Per stack first (typed arrays: blocks outnumber stacks a hundredfold), then per frame.
  const stacks = snapshot.stacks.count;
  const blocksOf = new Float64Array(stacks);
  const bytesOf = new Float64Array(stacks);
  const requestedOf = new Float64Array(stacks);
  for (let i = 0; i < b.count; i++) {
    if (b.state[i] !== allocated) continue;
    if (device !== null && snapshot.segments[b.segment[i]!]!.device !== device) continue;
    const stack = b.stack[i]!;
    blocksOf[stack]++;
    bytesOf[stack] += b.size[i]!;
    requestedOf[stack] += b.requestedSize[i]!;
  }
  const acc = new Map<string, { blocks: number; bytes: number; requested: number }>();
  for (let stack = 0; stack < stacks; stack++) {
    if (blocksOf[stack] === 0) continue;
    const frame = l.allocatingFrame(stack);
    let a = acc.get(frame);
    if (!a) acc.set(frame, (a = { blocks: 0, bytes: 0, requested: 0 }));
    a.blocks += blocksOf[stack]!;
    a.bytes += bytesOf[stack]!;
    a.requested += requestedOf[stack]!;
  }
  return [...acc]
    .map(([frame, a]) => ({ frame, ...a }))
    .sort((x, y) => y.bytes - x.bytes || (x.frame < y.frame ? -1 : 1));
}
