import type { Command } from 'commander';
import { formatFragmentation } from '../../torch/text-reports.js';
import { fragmentation } from '../../torch/snapshot-analysis.js';
import { openSnapshotWithProgress, printJson, textStyle, printText } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('stats')
    .description("how the allocator's segments are filled: a page map per segment, internal vs external free memory, fragmentation (like _memory_viz.py stats)")
    .argument('<snapshot>', 'a memory snapshot pickle (torch.cuda.memory._dump_snapshot)')
    .option('--json', 'print per-segment figures and totals as JSON')
    .action(async (file: string, opts: { json?: boolean }) => {
      const snapshot = await openSnapshotWithProgress(file, 'stats');
      if (opts.json) printJson(fragmentation(snapshot));
      else printText(formatFragmentation(snapshot, { style: textStyle() }));
    });
}
