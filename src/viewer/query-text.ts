/**
 * A query's result as text and as JSON, for `memscope query`: the same totals the page's query
 * box shows. Platform-free.
 */
import { humanBytes } from '../core/units.js';
import { renderTable } from '../render/table.js';
import { allocationPhase, allocationUserFrame, type QueryResult } from './query.js';
import type { ReportData } from './report-data.js';

/** One matching allocation, as `memscope query --json` lists it. */
export interface QueryAllocationJson {
  readonly device: string;
  readonly bytes: number;
  readonly address: number;
  /** Trace event that made / freed it (-1: before the trace / never). */
  readonly start: number;
  readonly end: number;
  readonly category: string | null;
  readonly phase: string | null;
  readonly userFrame: string | null;
  readonly site: string;
}

export interface QueryJson {
  readonly query: string;
  /** The snapshot's reading notes (as every verb's --json gives them). */
  readonly warnings: readonly string[];
  readonly count: number;
  readonly bytes: number;
  readonly peakBytes: number;
  readonly group: string | null;
  readonly groupCount: number;
  readonly groups: { key: string; count: number; bytes: number; peakBytes: number }[] | null;
  readonly allocations: QueryAllocationJson[] | null;
}

export function queryJson(data: ReportData, text: string, r: QueryResult): QueryJson {
  const str = (i: number): string => data.strings[i] ?? '';
  return {
    query: text,
    warnings: data.warnings ?? [],
    count: r.count,
    bytes: r.bytes,
    peakBytes: r.peakBytes,
    group: r.group,
    groupCount: r.groupCount,
    groups: r.groups ? r.groups.map((g) => ({ ...g })) : null,
    allocations: r.groups
      ? null
      : r.allocations.map(([di, a]) => {
          const d = data.memory!.devices[di]!;
          const f = d.facets;
          return {
            device: d.device,
            bytes: d.bytes[a]!,
            address: d.address[a]!,
            start: d.start[a]!,
            end: d.end[a]!,
            category: f ? f.categoryNames[f.category[a]!]! : null,
            phase: f ? allocationPhase(f, d.start[a]!).phase : null,
            userFrame: str(allocationUserFrame(data, d.stack[a]!).frame) || null,
            site: str(d.site[a]!),
          };
        }),
  };
}

export function formatQueryResult(data: ReportData, text: string, r: QueryResult): string {
  const j = queryJson(data, text, r);
  const lines = [`${j.count.toLocaleString('en-US')} allocation${j.count === 1 ? '' : 's'} · ${humanBytes(j.bytes)} allocated · ${humanBytes(j.peakBytes)} live at the peak (categories are inferred from the stacks)`];
  if (j.groups) {
    lines.push(renderTable([j.group!, 'allocations', 'bytes', 'live at the peak'], j.groups.map((g) => [g.key, g.count.toLocaleString('en-US'), humanBytes(g.bytes), humanBytes(g.peakBytes)]), { align: ['left', 'right', 'right', 'right'] }));
    if (j.groupCount > j.groups.length) lines.push(`the top ${j.groups.length} of ${j.groupCount.toLocaleString('en-US')} groups (top:N shows more)`);
  } else if (j.allocations!.length) {
    const ev = (e: number, none: string): string => (e < 0 ? none : `event ${e}`);
    lines.push(
      renderTable(
        ['bytes', 'device', 'address', 'allocated', 'freed', 'category', 'user frame'],
        j.allocations!.map((a) => [humanBytes(a.bytes), a.device, a.address < 0 ? 'unknown' : `0x${a.address.toString(16)}`, ev(a.start, 'before the trace'), ev(a.end, 'never'), a.category ?? '', a.userFrame ?? a.site]),
        { align: ['right', 'left', 'left', 'left', 'left', 'left', 'left'] },
      ),
    );
    if (j.count > j.allocations!.length) lines.push(`the ${j.allocations!.length} first of ${j.count.toLocaleString('en-US')} by the sort key (top:N shows more)`);
  }
  return lines.join('\n') + '\n';
}
