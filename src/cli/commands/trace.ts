import type { Command } from 'commander';
import { traceEventLines } from '../../torch/text-reports.js';
import { emitTraceLines, snapshotTimeline } from '../../torch/snapshot-analysis.js';
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
          // --limit keeps each device's first events, as the text keeps the first lines.
          devices: trace.devices.map((d) => {
            const n = Math.min(d.count, limit);
            const cut = (xs: ArrayLike<number> | null): number[] | null => (xs ? Array.from(xs).slice(0, n) : null);
            return { device: d.device, count: d.count, time: cut(d.time), bytes: cut(d.bytes), allocated: cut(d.allocated), reserved: cut(d.reserved) };
          }),
          warnings: opened.kind === 'snapshot' ? opened.snapshot.warnings : [],
        });
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
