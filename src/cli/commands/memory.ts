import type { Command } from 'commander';
import { blockFlameStacks, renderSnapshotFlameGraph } from '../../torch/snapshot-flamegraph.js';
import { nonNegativeInt } from '../options.js';
import { openSnapshotWithProgress, printJson, writeOutput } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('memory')
    .description('flame graph of reserved memory by allocating stack (like _memory_viz.py memory, no flamegraph.pl needed)')
    .argument('<snapshot>', 'a memory snapshot pickle (torch.cuda.memory._dump_snapshot)')
    .option('-o, --output <file>', 'SVG file to write', 'memory.svg')
    .option('--device <n>', 'only this CUDA device', (v) => nonNegativeInt(v, '--device'))
    .option('--json', 'print the weighted stacks as JSON instead of drawing them')
    .action(async (file: string, opts: { output: string; device?: number; json?: boolean }) => {
      const device = opts.device ?? null;
      const snapshot = await openSnapshotWithProgress(file, 'memory');
      if (opts.json) {
        printJson({ stacks: blockFlameStacks(snapshot, false, device), warnings: snapshot.warnings });
        return;
      }
      writeOutput(opts.output, renderSnapshotFlameGraph(snapshot, 'memory', { device }), 'a flame graph');
    });
}
