import type { Command } from 'commander';
import { traceEventLines } from '../../torch/text-reports.js';
import { emitTraceLines, frameLabels, NO_FRAMES, snapshotTimeline } from '../../torch/snapshot-analysis.js';
import type { MemorySnapshot } from '../../torch/snapshot.js';
import type { MemoryTrace } from '../../torch/memory-trace.js';
import { nonNegativeInt } from '../options.js';
import { openWithProgress, printJson, printText } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('trace')
    .description("print a snapshot's allocator trace (like _memory_viz.py trace) or a profiler trace's memory events as readable lines")
    .argument('<file>', 'a snapshot pickle recorded with history, a Kineto trace or export_memory_timeline JSON')
    .option('--frames', 'add the top stack frame to each snapshot trace line')
    .option('--limit <n>', 'lines per device for profiler traces (default: all)', (v) => nonNegativeInt(v, '--limit'))
    .option('--json', 'print the events as JSON columns per device (time, bytes, allocated, reserved; a snapshot adds action, address, size, stream, site; a profiler trace, address and operator)')
    .action(async (file: string, opts: { frames?: boolean; limit?: number; json?: boolean }) => {
      const limit = opts.limit ?? Number.POSITIVE_INFINITY;
      const opened = await openWithProgress(file);
      if (opts.json) {
        printJson(opened.kind === 'snapshot' ? snapshotTraceJson(opened.snapshot, limit) : { ...profilerTraceJson(opened.trace, limit), warnings: [] });
        return;
      }
      if (opened.kind !== 'snapshot') {
        const empty = '(no memory events: record them with torch.profiler.profile(profile_memory=True))\n';
        const lines = traceEventLines(opened.trace, { limit });
        printText(lines.length === 0 ? empty : lines.join('\n') + '\n');
        return;
      }
      const empty = '(no trace events: record them with torch.cuda.memory._record_memory_history() before taking the snapshot)\n';
      // Written out in batches as the lines are made: a snapshot's trace can have millions.
      const batch: string[] = [];
      let any = false;
      emitTraceLines(opened.snapshot, { frames: opts.frames }, (line) => {
        any = true;
        if (batch.push(line) === 16384) {
          printText(batch.join('\n') + '\n');
          batch.length = 0;
        }
      });
      printText(!any ? empty : batch.length > 0 ? batch.join('\n') + '\n' : '');
    });
}

/** The first `n` of `xs`, as a JSON array. */
function firstOf<T>(xs: ArrayLike<T>, n: number): T[] {
  return Array.from({ length: Math.min(n, xs.length) }, (_, i) => xs[i]!);
}

/**
 * `trace --json` of a profiler trace or timeline: each device's events as columns, its first
 * `limit` (as the text keeps its first lines). `address` is null where the file records none,
 * `operator` where no CPU operator encloses the event.
 */
function profilerTraceJson(trace: MemoryTrace, limit: number) {
  const ops = trace.operators;
  return {
    source: trace.source,
    devices: trace.devices.map((d) => {
      const n = Math.min(d.count, limit);
      return {
        device: d.device,
        count: d.count,
        time: firstOf(d.time, n),
        bytes: firstOf(d.bytes, n),
        allocated: firstOf(d.allocated, n),
        reserved: d.reserved ? firstOf(d.reserved, n) : null,
        address: d.addr ? firstOf(d.addr, n) : null,
        operator: firstOf(d.operator, n).map((op) => (op >= 0 ? ops.names[ops.nameIndex[op]!]! : null)),
      };
    }),
  };
}

/**
 * `trace --json` of a snapshot: the timeline's columns (time, bytes, allocated, reserved), and per
 * trace entry its action, address, size, stream and site (the allocating frame by the site rule;
 * null for an entry with no frames) — one element per `device_traces` entry, in order.
 */
function snapshotTraceJson(snapshot: MemorySnapshot, limit: number) {
  const timeline = profilerTraceJson(snapshotTimeline(snapshot), limit);
  const labels = frameLabels(snapshot);
  const sites = new Map<number, string | null>();
  const siteOf = (stack: number): string | null => {
    let site = sites.get(stack);
    if (site === undefined) {
      const frame = labels.allocatingFrame(stack);
      site = frame === NO_FRAMES ? null : frame;
      sites.set(stack, site);
    }
    return site;
  };
  const traced = snapshot.traces.filter((t) => t.count > 0);
  return {
    source: timeline.source,
    devices: timeline.devices.map(({ address: _address, operator: _operator, ...columns }, k) => {
      const t = traced[k]!;
      const n = Math.min(t.count, limit);
      return {
        ...columns,
        action: firstOf(t.action, n).map((a) => snapshot.actionNames[a]!),
        address: firstOf(t.addr, n),
        size: firstOf(t.size, n),
        stream: firstOf(t.stream, n),
        site: firstOf(t.stack, n).map(siteOf),
      };
    }),
    warnings: snapshot.warnings,
  };
}
