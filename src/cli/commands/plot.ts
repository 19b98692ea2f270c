import path from 'node:path';
import type { Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';
import { renderMemoryPlotHtml } from '../../torch/memory-plot-html.js';
import { snapshotTimeline } from '../../torch/snapshot-analysis.js';
import { devicePeak } from '../../torch/memory-trace.js';
import { deviceIndexOfLabel } from '../../torch/device-type.js';
import { usageError } from '../options.js';
import { openWithProgress, printJson, writeOutput } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('plot')
    .description('active memory timeline as a self-contained HTML page (from a snapshot trace, a Kineto trace or export_memory_timeline JSON)')
    .argument('<file>', 'a snapshot pickle with a trace, a Kineto trace (.json / .json.gz) or export_memory_timeline JSON')
    .option('-o, --output <file>', 'HTML file to write', 'memory-timeline.html')
    .option('--device <name>', "only this device (as listed by summary, e.g. 'cuda:0')")
    .option('--json', 'print peak figures per device as JSON (the HTML is still written)')
    .action(async (file: string, opts: { output: string; device?: string; json?: boolean }) => {
      const opened = await openWithProgress(file);
      let trace = opened.kind === 'snapshot' ? snapshotTimeline(opened.snapshot) : opened.trace;
      if (opts.device !== undefined) {
        // A label (cuda:1, cpu) or, as the snapshot verbs take it, an index (1 for cuda:1).
        const want = opts.device.trim();
        const devices = trace.devices.filter((d) => d.device === want || (/^\d+$/.test(want) && deviceIndexOfLabel(d.device) === Number(want)));
        if (devices.length === 0) {
          throw usageError(`--device ${opts.device}: ${file} has ${trace.devices.map((d) => d.device).join(', ') || 'no devices'}`);
        }
        trace = { ...trace, devices };
      }
      if (trace.devices.length === 0) {
        throw new MemscopeError(
          'no-trace',
          `${file}: nothing to plot: ${opened.kind === 'snapshot' ? 'the snapshot has no trace (record it with torch.cuda.memory._record_memory_history())' : 'the trace has no [memory] events (profile with profile_memory=True)'}`,
        );
      }
      writeOutput(opts.output, renderMemoryPlotHtml(trace, `Memory timeline: ${path.basename(file)}`), 'the memory timeline');
      if (opts.json) printJson({ devices: trace.devices.map(devicePeak), warnings: opened.kind === 'snapshot' ? opened.snapshot.warnings : [] });
    });
}
