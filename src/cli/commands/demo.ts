import type { Command } from 'commander';
import { UNITS } from '../../core/units.js';
import type { MemTrackerSnapshot, ModuleMemStats } from '../../tracking/mem-types.js';
import { choice, optionWithDefault, positiveInt, usageOf } from '../options.js';

export interface DemoOptions {
  /** Absent: the first installed of cpu, wasm. */
  backend?: string;
  steps: string;
  batchSize: string;
  units: string;
  depth: string;
  json?: boolean;
}

/** What `memscope demo --json` prints: the figures of the tables, in bytes. */
export interface DemoJson {
  readonly model: string;
  readonly backend: string;
  readonly steps: number;
  readonly batchSize: number;
  readonly losses: readonly number[];
  /** Bytes per category per device at the highest total while tracking. */
  readonly peak: MemTrackerSnapshot;
  /** Bytes per category per device after training. */
  readonly current: MemTrackerSnapshot;
  /** Module-wise statistics of the last step, modules down to `depth`, sorted by name. */
  readonly depth: number;
  readonly modules: readonly ModuleMemStats[];
}

/**
 * Trains the built-in model (Dense → BatchNorm → Dense, Adam, generated data)
 * under MemTracker and prints what PyTorch's MemTracker prints: the peak
 * snapshot, the snapshot after training and the module-wise tables. The
 * module-wise tables cover the last step, when Adam's state already exists
 * (statistics are reset before it, as PyTorch advises between iterations).
 */
export async function runDemo(opts: DemoOptions, print: (text: string) => void): Promise<void> {
  const steps = positiveInt(opts.steps, '--steps');
  const batchSize = positiveInt(opts.batchSize, '--batch-size');
  const depth = positiveInt(opts.depth, '--depth');
  const units = choice(opts.units, '--units', UNITS);
  // TFJS is loaded only when the command runs, so other verbs start fast, and from the user's
  // install (a peer dependency): a missing package is a one-line error naming what to install.
  const { defaultDemoBackend, parseDemoBackend, useDemoBackend } = await import('../../tfjs/demo-backend-node.js');
  const backend = opts.backend === undefined ? await defaultDemoBackend() : usageOf(() => parseDemoBackend(opts.backend));
  await useDemoBackend(backend);
  const { createDemoRun, DEMO_SHAPE } = await import('../../tfjs/demo-model.js');
  const { MemTracker } = await import('../../tfjs/mem-tracker.js');

  const shape = { ...DEMO_SHAPE, batchSize };
  const run = createDemoRun(shape);
  const tracker = new MemTracker();
  tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
  const losses: number[] = [];
  try {
    tracker.track(() => {
      for (let step = 1; step <= steps; step++) {
        if (step === steps && steps > 1) tracker.resetModStats();
        losses.push(...run.train(1));
      }
    });
  } finally {
    run.dispose();
  }

  const model = `Dense(${shape.inputs}→${shape.hidden}, relu) → BatchNorm → Dense(${shape.hidden}→${shape.outputs}), Adam`;
  if (opts.json) {
    const modules = tracker
      .moduleStats()
      .filter((m) => m.depth <= depth)
      .sort((a, b) => (a.modFqn < b.modFqn ? -1 : a.modFqn > b.modFqn ? 1 : 0));
    const json: DemoJson = { model, backend, steps, batchSize, losses, peak: tracker.snapshot('peak'), current: tracker.snapshot('current'), depth, modules };
    print(JSON.stringify(json, null, 2));
    return;
  }
  print(`memscope demo: ${model}, batch ${batchSize}, ${steps} step(s) on the ${backend} backend; loss ${losses.map((l) => l.toFixed(4)).join(' → ')}`);
  print('');
  print(`Peak memory (the highest total while tracking):`);
  print(tracker.formatSnapshot('peak', { units, tabulate: true }));
  print('');
  print(`Memory after training (weights, buffers, optimizer state, data):`);
  print(tracker.formatSnapshot('current', { units, tabulate: true }));
  print('');
  print(`Module-wise snapshots of step ${steps} (depth ${depth}):`);
  print(tracker.formatModulewiseSnapshots({ depth, units, tabulate: true }));
}

export function register(program: Command): void {
  program
    .command('demo')
    .description("train a small built-in TFJS model under MemTracker and print PyTorch-style memory tables (no download)")
    .option('--backend <name>', 'TFJS backend: cpu or wasm (default: cpu if installed, else wasm)')
    .addOption(optionWithDefault('--steps <n>', 'training steps', '3'))
    .addOption(optionWithDefault('--batch-size <n>', 'examples per step', '16'))
    .addOption(optionWithDefault('--units <unit>', 'B, KiB, MiB or GiB', 'KiB'))
    .addOption(optionWithDefault('--depth <n>', 'module levels shown in the module-wise tables (the model is level 1)', '2'))
    .option('--json', 'print the tables\' figures (bytes per category, per device and per module) as JSON')
    .action(async (opts: DemoOptions) => {
      await runDemo(opts, (text) => process.stdout.write(`${text}\n`));
    });
}
