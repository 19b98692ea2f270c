import { humanBytes } from '../../core/units.js';
import { loadAllocatorPolicy } from '../../allocator/policy-module-node.js';
import { replayThroughAllocator, type PolicyReplayResult } from '../../allocator/policy-replay.js';
import type { ParsedSnapshot } from '../../allocator/replay.js';
import { parseAllocatorConf } from '../../allocator/settings.js';
import { renderTable } from '../../render/table.js';
import { usageError, usageOf } from '../options.js';
import { notesText } from '../torch-common.js';

export interface PolicyReplayOptions {
  allocator: string;
  allocConf?: string;
  capacity: number | null;
  /** A device with a trace (the caller checks). */
  device: number;
  json?: boolean;
}

function percent(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}

function at(index: number): string {
  return index < 0 ? 'start state' : `event ${index}`;
}

/** The report of `memscope replay FILE --allocator POLICY`: the policy's figures beside PyTorch's. */
export function renderPolicyReplay(file: string, r: PolicyReplayResult): string {
  const p = r.pytorch;
  const rows: string[][] = [
    ['peak reserved', humanBytes(r.peakReservedBytes), humanBytes(p.peakReservedBytes)],
    ['  reached at', at(r.peakReservedAt), at(p.peakReservedAt)],
    ['peak live (requested bytes)', humanBytes(r.peakLiveBytes), humanBytes(p.peakLiveBytes)],
    ['fragmentation at peak', percent(r.fragmentationAtPeak), percent(p.fragmentationAtPeak)],
    ['out of memory', r.oom ? `yes, at ${at(r.oom.traceIndex)} (${humanBytes(r.oom.requestedBytes)})` : 'no', p.ooms > 0 ? `${p.ooms} recorded` : 'no'],
  ];
  const out: string[] = [];
  const capacity = r.capacity === null ? 'unlimited capacity' : `capacity ${humanBytes(r.capacity)}`;
  out.push(`replay of ${file}, device ${r.device}, through the ${r.policy} allocator (${capacity})`);
  out.push(renderTable(['', r.policy, 'PyTorch (recorded)'], rows, { align: ['left', 'right', 'right'] }));
  out.push(
    r.reservedSource === 'allocator'
      ? `reserved: as ${r.policy} reports it (reservedBytes); end of run ${humanBytes(r.endReservedBytes)}`
      : `reserved: ${r.policy} has no reservedBytes, so reserved is the span from its lowest to its highest live byte; end of run ${humanBytes(r.endReservedBytes)}`,
  );
  out.push(`${r.allocs} allocs, ${r.frees} frees, ${r.emptyCacheCalls} empty_cache calls`);
  if (r.oom === null) {
    const diff = r.peakReservedBytes - p.peakReservedBytes;
    const rel = p.peakReservedBytes === 0 ? '' : ` (${diff >= 0 ? '+' : ''}${((diff / p.peakReservedBytes) * 100).toFixed(1)}%)`;
    out.push(`peak reserved vs PyTorch: ${diff >= 0 ? '+' : '-'}${humanBytes(Math.abs(diff))}${rel}`);
  } else out.push(`out of memory: ${r.oom.message}`);
  for (const o of r.recordedOoms) {
    out.push(`recorded OOM at event ${o.traceIndex} (${humanBytes(o.requestedBytes)}): ${o.avoided ? `${r.policy} serves it` : `${r.policy} runs out too`}`);
  }
  return out.join('\n') + '\n';
}

/** `memscope replay FILE --allocator native|cudaMallocAsync|./policy.mjs`. */
export async function runPolicyReplay(file: string, snap: ParsedSnapshot, opts: PolicyReplayOptions): Promise<void> {
  const device = opts.device;
  const factory = await loadAllocatorPolicy(opts.allocator);
  const settings = opts.allocConf === undefined ? snap.settings : usageOf(() => parseAllocatorConf(opts.allocConf!));
  if (settings.backend === 'cudaMallocAsync' && opts.allocator !== 'cudaMallocAsync') {
    throw usageError(`--alloc-conf ${opts.allocConf}: backend:cudaMallocAsync names an allocator; use --allocator cudaMallocAsync`);
  }
  const result = replayThroughAllocator({ ...snap, settings }, factory, { capacity: opts.capacity, device });
  if (opts.json) {
    process.stdout.write(JSON.stringify({ file, warnings: snap.warnings, ...result }, null, 2) + '\n');
    return;
  }
  process.stdout.write(renderPolicyReplay(file, result) + notesText(snap.warnings));
}
