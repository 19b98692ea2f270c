/** How the history views name segments, pools, streams, addresses and sites. */
import type { ReportData } from '../report-data.js';
import { humanBytes } from './timeline.js';
import type { SegmentState } from './state-history-model.js';

export function hexAddress(a: number): string {
  return Number.isFinite(a) && a >= 0 ? `0x${a.toString(16)}` : '—';
}

export function poolText(s: SegmentState): string {
  if (!s.pool) return 'pool not recorded';
  return s.pool[0] === 0 && s.pool[1] === 0 ? 'default pool' : `private pool (${s.pool[0]}, ${s.pool[1]})`;
}

/** A segment's one-line description: address, size, pool, stream, kind. */
export function segmentText(s: SegmentState, stream: string): string {
  const kind = s.expandable ? 'expandable segment (mapped range)' : s.kind ? `${s.kind}-pool segment` : 'segment';
  const released = !s.kind && !s.pool ? ' (released before the snapshot, so not recorded)' : '';
  return `${kind} ${hexAddress(s.address)} · ${humanBytes(s.size)} · ${poolText(s)}${released} · stream ${stream}`;
}

/** A stack's site (the first frame outside the allocator and the framework), as the report's other views name it. */
export function userFrame(data: ReportData, stack: number): string | null {
  if (stack < 0) return null;
  const site = data.memory?.stackSite[stack] ?? 0;
  return site > 0 ? (data.strings[site] ?? null) : null;
}

export function streamName(s: number): string {
  return s === 0 ? '0 (default)' : s < 1e6 ? String(s) : `0x${s.toString(16)}`;
}
