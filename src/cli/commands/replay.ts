import type { Command } from 'commander';
import { humanBytes } from '../../core/units.js';
import { capacityAtOom, replaySnapshot, whatIf, type DeviceReplayReport, type Rate, type WhatIfResult } from '../../allocator/replay.js';
import { hexAddress } from '../../allocator/caching-allocator.js';
import { parseAllocatorConf } from '../../allocator/settings.js';
import { readReplaySnapshot } from '../../allocator/read-snapshot-node.js';
import { renderTable } from '../../render/table.js';
import { runPolicyReplay } from './replay-policy.js';
import { byteSize, deviceIndex, usageError, usageOf } from '../options.js';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { MemscopeError } from '../../core/errors.js';
import { notesText } from '../torch-common.js';

function pct(r: Rate): string {
  return `${r.matched}/${r.total}  ${(r.rate * 100).toFixed(2)}%`;
}

function whatIfColumn(r: WhatIfResult): string[] {
  return [
    humanBytes(r.peakReservedBytes),
    humanBytes(r.peakAllocatedBytes),
    `${(r.fragmentationAtPeak * 100).toFixed(1)}%`,
    String(r.peakSegments),
    String(r.deviceAllocs),
    String(r.allocRetries),
    r.oom ? `yes, at trace event ${r.oom.traceIndex} (${humanBytes(r.oom.requestedBytes)})` : 'no',
  ];
}

function describeSettings(hasSettings: boolean, conf: string): string {
  if (!hasSettings) return 'none recorded: PyTorch defaults';
  return conf === '' ? 'PyTorch defaults: PYTORCH_CUDA_ALLOC_CONF was not set' : `PYTORCH_CUDA_ALLOC_CONF=${JSON.stringify(conf)}`;
}

function deviceLines(d: DeviceReplayReport): string[] {
  const out: string[] = [];
  const expandable = d.startExpandableRanges > 0 ? `, ${d.startExpandableRanges} mapped expandable ranges` : '';
  const from = d.replayedFrom > 0 ? ` (replayed from event ${d.replayedFrom})` : '';
  out.push(`device ${d.device}: ${d.traceEvents} trace events${from}, ${d.allocs} allocs; start state ${d.startSegments} segments${expandable}, ${d.startLiveBlocks} live blocks`);
  out.push(
    renderTable(
      ['compared with PyTorch', 'matched'],
      [
        ['alloc addresses', pct(d.allocAddresses)],
        ['segment events (order, address, size)', `${pct(d.segmentEvents)} (model emitted ${d.segmentEvents.model})`],
        ['final segments', pct(d.finalSegments)],
        ['final blocks', pct(d.finalBlocks)],
      ],
      { align: ['left', 'right'] },
    ),
  );
  if (d.incomplete) {
    out.push(`trace incomplete: ${d.incomplete.reason}`);
    for (const a of d.incomplete.allocations.slice(0, 10)) out.push(`  ${hexAddress(a.address)}${a.requestedSize ? ` (${a.requestedSize} bytes requested)` : ''}: ${a.detail}`);
    if (d.incomplete.allocations.length > 10) out.push(`  … and ${d.incomplete.allocations.length - 10} more (--json lists them all)`);
  } else out.push('trace complete: it accounts for every segment and block of the end state');
  for (const o of d.ooms) {
    out.push(
      `OOM at event ${o.traceIndex}: PyTorch could not allocate ${humanBytes(o.requestedBytes)} with ${humanBytes(o.deviceFreeBytes)} free on the device; ` +
        (o.reproduced
          ? `the model, at the same point, also runs out (allocated ${humanBytes(o.allocatedBytes)}, reserved ${humanBytes(o.reservedBytes)})`
          : 'the model, at the same point, does not run out'),
    );
  }
  const a = d.oomAnswer;
  if (a) {
    const where = (at: number | null): string => (at === null ? 'never runs out' : `runs out at event ${at}`);
    out.push(
      `would ${a.alternative} have avoided it? ${a.avoided ? 'yes' : 'no'}: on a device of ${humanBytes(a.capacityBytes)} (reserved + free at the OOM) ` +
        `the run ${where(a.recordedOomAt)} under the recorded settings and ${where(a.alternativeOomAt)} under ${a.alternative} (what-if: --alloc-conf, --capacity)`,
    );
  }
  const listed = new Set(d.incomplete?.allocations.map((x) => x.detail));
  for (const p of d.startStateProblems) if (!listed.has(p)) out.push(`  note: ${p}`);
  if (d.mismatches.length > 0) {
    out.push('first mismatches:');
    for (const m of d.mismatches) out.push(`  [event ${m.traceIndex}] ${m.kind}: ${m.message}`);
  }
  return out;
}

function recordedOomLines(recorded: WhatIfResult, proposed: WhatIfResult): string[] {
  const byIndex = new Map(recorded.recordedOoms.map((o) => [o.traceIndex, o]));
  const indexes = [...new Set([...recorded.recordedOoms, ...proposed.recordedOoms].map((o) => o.traceIndex))].sort((x, y) => x - y);
  const verdict = (o: WhatIfResult['recordedOoms'][number] | undefined): string => (o === undefined ? 'not reached' : o.avoided ? 'fits' : 'out of memory');
  return indexes.map((i) => {
    const p = proposed.recordedOoms.find((o) => o.traceIndex === i);
    const size = (byIndex.get(i) ?? p)!.requestedBytes;
    return `recorded OOM at event ${i} (${humanBytes(size)}): recorded settings ${verdict(byIndex.get(i))}, what-if ${verdict(p)}\n`;
  });
}

export function register(program: Command): void {
  program
    .command('replay')
    .description("replay a PyTorch memory snapshot's trace through memscope's caching-allocator model: fidelity against PyTorch, or what the run would cost under other settings")
    .argument('<snapshot>', 'a snapshot from torch.cuda.memory._dump_snapshot (pickle or JSON) with a trace')
    .option('--alloc-conf <conf>', 'what-if: PYTORCH_CUDA_ALLOC_CONF-style settings, e.g. expandable_segments:True')
    .option('--capacity <bytes>', 'what-if: device capacity (e.g. 24GiB); the run stops at the first OOM')
    .option('--device <n>', 'device whose trace to use in what-if mode (default: the traced device, or 0 when several are)')
    .option('--allocator <policy>', "replay through an allocator: native, cudaMallocAsync, or a path to your ES module (see docs/ALLOCATOR.md)")
    .option('--json', 'print the result as JSON')
    .action((file: string, opts: { allocConf?: string; capacity?: string; device?: string; json?: boolean; allocator?: string }) => {
      // Option values are checked before the file is read: a usage error costs no read.
      const requestedCapacity = opts.capacity === undefined ? null : byteSize(opts.capacity, '--capacity');
      const askedDevice = opts.device === undefined ? null : deviceIndex(opts.device);
      const proposedSettings = opts.allocConf === undefined ? null : usageOf(() => parseAllocatorConf(opts.allocConf!));
      const spec = opts.allocator;
      if (spec !== undefined && spec !== 'native' && spec !== 'cudaMallocAsync' && !existsSync(resolve(spec))) {
        throw usageError(`--allocator ${spec}: not native, cudaMallocAsync, or an existing .mjs/.js file`);
      }
      const snap = readReplaySnapshot(file);
      const traced = snap.traces.flatMap((t, d) => (t.length ? [d] : []));
      // Nothing to replay is the file's lack, whatever the mode: one line, exit 1.
      if (!traced.length) throw new MemscopeError('nothing-to-replay', `${file}: no device trace to replay (record with _record_memory_history(enabled='all'))`);
      const device = askedDevice ?? (traced.length === 1 ? traced[0]! : 0);
      const whatIfMode = opts.allocator !== undefined || opts.allocConf !== undefined || opts.capacity !== undefined;
      if (whatIfMode && !snap.traces[device]?.length) throw usageError(`${file}: device ${device} has no trace to replay (traced: ${traced.join(', ')})`);
      if (opts.allocator !== undefined) {
        return runPolicyReplay(file, snap, { ...opts, allocator: opts.allocator, capacity: requestedCapacity, device });
      }
      if (opts.allocConf === undefined && opts.capacity === undefined) {
        const report = replaySnapshot(snap);
        if (opts.json) {
          process.stdout.write(JSON.stringify({ file, warnings: snap.warnings, ...report }, null, 2) + '\n');
          return;
        }
        const out: string[] = [];
        out.push(`replay of ${file} under its recorded settings (${describeSettings(report.hasSettings, report.settings)})`);
        for (const d of report.devices) out.push(...deviceLines(d));
        for (const device of report.untracedDevices) out.push(`device ${device}: no trace events; nothing to replay`);
        process.stdout.write(out.join('\n') + '\n' + notesText(snap.warnings));
        return;
      }
      if (proposedSettings?.backend === 'cudaMallocAsync') {
        throw usageError(`--alloc-conf ${opts.allocConf}: the what-if replay runs the native caching allocator; replay through the cudaMallocAsync model with --allocator cudaMallocAsync`);
      }
      // A run that died of an OOM is asked about the device it died on: PyTorch's reserved plus free bytes then.
      let capacity = requestedCapacity;
      let capacityNote = '';
      if (capacity === null && snap.traces[device].some((e) => e.action === 'oom')) {
        const oom = replaySnapshot(snap).devices.find((d) => d.device === device)?.ooms[0];
        if (oom) {
          capacity = capacityAtOom(oom);
          capacityNote = ` (reserved + free at the recorded OOM, event ${oom.traceIndex})`;
        }
      }
      const settings = proposedSettings ?? snap.settings;
      const recorded = whatIf(snap, snap.settings, capacity, device);
      const proposed = whatIf(snap, settings, capacity, device);
      if (opts.json) {
        process.stdout.write(JSON.stringify({ file, warnings: snap.warnings, device, recorded, whatIf: proposed }, null, 2) + '\n');
        return;
      }
      const head = ['', `recorded settings (${snap.settings.conf || 'defaults'})`, `what-if (${settings.conf || 'defaults'})`];
      const labels = ['peak reserved', 'peak allocated', 'fragmentation at peak', 'peak segments', 'cudaMalloc/map calls', 'alloc retries', 'out of memory'];
      const a = whatIfColumn(recorded);
      const b = whatIfColumn(proposed);
      process.stdout.write(
        `what-if replay of ${file}, device ${device}${capacity !== null ? `, capacity ${humanBytes(capacity)}${capacityNote}` : ', unlimited capacity'}\n` +
          renderTable(head, labels.map((l, i) => [l, a[i], b[i]]), { align: ['left', 'right', 'right'] }) +
          '\n' +
          recordedOomLines(recorded, proposed).join('') +
          (proposed.oom ? `what-if OOM: ${proposed.oom.message}\n` : '') +
          notesText(snap.warnings),
      );
    });
}
