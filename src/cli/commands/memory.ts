import type { Command } from 'commander';
import { blockFlameStacks, renderSnapshotFlameGraph } from '../../torch/snapshot-flamegraph.js';
import { deviceIndex, requireSnapshotDevice } from '../options.js';
import { openSnapshotWithProgress, printJson, writeOutput } from '../torch-common.js';

export function register(program: Command): void {
  program
    .command('memory')
    .description('flame graph of reserved memory by allocating stack (like _memory_viz.py memory, no flamegraph.pl needed)')
    .argument('<snapshot>', 'a memory snapshot pickle (torch.cuda.memory._dump_snapshot)')
    .option('-o, --output <file>', 'SVG file to write', 'memory.svg')
    .option('--device <n>', 'only this device: its index or label (1, cuda:1)', (v) => deviceIndex(v))
    .option('--json', 'print the weighted stacks as JSON instead of drawing them')
    .action(async (file: string, opts: { output: string; device?: number; json?: boolean }) => {
      const device = opts.device ?? null;
      const snapshot = await openSnapshotWithProgress(file, 'memory');
      requireSnapshotDevice(snapshot, device, file);
      if (opts.json) {
        printJson({ deviceType: snapshot.deviceType, stacks: blockFlameStacks(snapshot, false, device), warnings: snapshot.warnings });
        return;
      }
      writeOutput(opts.output, renderSnapshotFlameGraph(snapshot, 'memory', { device }), 'a flame graph');
    });
}
