/** What changed between two snapshots, by allocating frame and by segment. */
import type { MemorySnapshot, Segment } from '../snapshot.js';
import { snapshotTotals } from './totals.js';
import { deviceLabel } from '../device-type.js';
import { totalsByFrame } from './live-allocations.js';
import { DEFAULT_SITE_RULE, type SiteRule } from '../../core/site-rule.js';

export interface FrameChange {
  readonly frame: string;
  readonly before: number;
  readonly after: number;
  readonly delta: number;
  readonly blocksBefore: number;
  readonly blocksAfter: number;
}

export interface SnapshotComparison {
  /** Each snapshot's device type ('cuda', 'webgpu'). */
  readonly deviceTypeBefore: string;
  readonly deviceTypeAfter: string;
  readonly changes: FrameChange[];
  readonly allocatedBefore: number;
  readonly allocatedAfter: number;
  readonly reservedBefore: number;
  readonly reservedAfter: number;
  /** Segments (by address and size) present in only one of the snapshots. */
  readonly segmentsOnlyBefore: OnlyHereSegment[];
  readonly segmentsOnlyAfter: OnlyHereSegment[];
  /** Both snapshots' reading warnings, each marked `before:` or `after:`. */
  readonly warnings: string[];
}

/** A segment found in one snapshot only; `device` as memscope names it ('webgpu:0'). */
export interface OnlyHereSegment {
  readonly device: string;
  readonly address: number;
  readonly totalSize: number;
}

/** Identity of a segment across two snapshots of one program. */
export const segmentKey = (s: Segment): string => `${s.device}:${s.address}:${s.totalSize}`;

/** What changed between two snapshots, by allocating frame (live bytes, by site), largest change first. */
export function compareSnapshots(before: MemorySnapshot, after: MemorySnapshot, site: SiteRule = DEFAULT_SITE_RULE): SnapshotComparison {
  const a = new Map(totalsByFrame(before, null, site).map((r) => [r.frame, r]));
  const b = new Map(totalsByFrame(after, null, site).map((r) => [r.frame, r]));
  const frames = new Set([...a.keys(), ...b.keys()]);
  const changes: FrameChange[] = [];
  for (const frame of frames) {
    const x = a.get(frame);
    const y = b.get(frame);
    const delta = (y?.bytes ?? 0) - (x?.bytes ?? 0);
    if (delta === 0 && (x?.blocks ?? 0) === (y?.blocks ?? 0)) continue;
    changes.push({ frame, before: x?.bytes ?? 0, after: y?.bytes ?? 0, delta, blocksBefore: x?.blocks ?? 0, blocksAfter: y?.blocks ?? 0 });
  }
  changes.sort((p, q) => Math.abs(q.delta) - Math.abs(p.delta) || (p.frame < q.frame ? -1 : 1));
  const key = segmentKey;
  const beforeKeys = new Set(before.segments.map(key));
  const afterKeys = new Set(after.segments.map(key));
  const ta = snapshotTotals(before);
  const tb = snapshotTotals(after);
  const only = (s: MemorySnapshot, other: Set<string>): OnlyHereSegment[] =>
    s.segments.filter((seg) => !other.has(key(seg))).map((seg) => ({ device: deviceLabel(s.deviceType, seg.device), address: seg.address, totalSize: seg.totalSize }));
  return {
    deviceTypeBefore: before.deviceType,
    deviceTypeAfter: after.deviceType,
    changes,
    allocatedBefore: ta.all.allocatedFromBlocks,
    allocatedAfter: tb.all.allocatedFromBlocks,
    reservedBefore: ta.all.reserved,
    reservedAfter: tb.all.reserved,
    segmentsOnlyBefore: only(before, afterKeys),
    segmentsOnlyAfter: only(after, beforeKeys),
    warnings: [...before.warnings.map((w) => `before: ${w}`), ...after.warnings.map((w) => `after: ${w}`)],
  };
}
