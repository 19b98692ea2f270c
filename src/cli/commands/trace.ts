import type { Command } from 'commander';
import { traceEventLines } from '../../report/torch-text.js';
import { snapshotTimeline, traceLines } from '../../torch/snapshot-analysis.js';
import { nonNegativeInt } from '../options.js';
import { openWithProgress, printJson, printText } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('trace')
    .description("print a snapshot's allocator trace (like _memory_viz.py trace) or a profiler trace's memory events as readable lines")
    .argument('<file>', 'a snapshot pickle recorded with history, a Kineto trace or export_memory_timeline JSON')
    .option('--frames', 'add the top stack frame to each snapshot trace line')
    .option('--limit <n>', 'lines per device for profiler traces (default: all)', (v) => nonNegativeInt(v, '--limit'))
    .option('--json', 'print the events as JSON columns (time, bytes, allocated, reserved per device)')
    .action(async (file: string, opts: { frames?: boolean; limit?: number; json?: boolean }) => {
      const limit = opts.limit ?? Number.POSITIVE_INFINITY;
      const opened = await openWithProgress(file);
      if (opts.json) {
        const trace = opened.kind === 'snapshot' ? snapshotTimeline(opened.snapshot) : opened.trace;
        printJson({
          source: trace.source,
          devices: trace.devices.map((d) => ({ device: d.device, count: d.count, time: d.time, bytes: d.bytes, allocated: d.allocated, reserved: d.reserved })),
          warnings: opened.kind === 'snapshot' ? opened.snapshot.warnings : [],
        });
        return;
      }
      const lines = opened.kind === 'snapshot' ? traceLines(opened.snapshot, { frames: opts.frames }) : traceEventLines(opened.trace, { limit });
      if (lines.length === 0) lines.push('(no trace events: record them with torch.cuda.memory._record_memory_history() before taking the snapshot)');
      printText(lines.join('\n') + '\n');
    });
}
