import type { Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';
import { parseUnit } from '../../core/units.js';

export interface DemoOptions {
  /** Absent: the first installed of cpu, wasm. */
  backend?: string;
  steps: string;
  batchSize: string;
  units: string;
  depth: string;
}

function integerAtLeast(value: string, flag: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    throw new MemscopeError('bad-argument', `demo: ${flag} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * Trains the built-in model (Dense → BatchNorm → Dense, Adam, generated data)
 * under MemTracker and prints what PyTorch's MemTracker prints: the peak
 * snapshot, the snapshot after training and the module-wise tables. The
 * module-wise tables cover the last step, when Adam's state already exists
 * (statistics are reset before it, as PyTorch advises between iterations).
 */
export async function runDemo(opts: DemoOptions, print: (text: string) => void): Promise<void> {
  const steps = integerAtLeast(opts.steps, '--steps', 1);
  const batchSize = integerAtLeast(opts.batchSize, '--batch-size', 1);
  const depth = integerAtLeast(opts.depth, '--depth', 1);
  const units = parseUnit(opts.units, 'demo: --units');
  // TFJS is loaded only when the command runs, so other verbs start fast, and from the user's
  // install (a peer dependency): a missing package is a one-line error naming what to install.
  const { defaultDemoBackend, parseDemoBackend, useDemoBackend } = await import('../../tfjs/demo-backend-node.js');
  const backend = opts.backend === undefined ? await defaultDemoBackend() : parseDemoBackend(opts.backend);
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

  print(
    `memscope demo: Dense(${shape.inputs}→${shape.hidden}, relu) → BatchNorm → Dense(${shape.hidden}→${shape.outputs}), ` +
      `Adam, batch ${batchSize}, ${steps} step(s) on the ${backend} backend; loss ${losses.map((l) => l.toFixed(4)).join(' → ')}`,
  );
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
    .option('--steps <n>', 'training steps', '3')
    .option('--batch-size <n>', 'examples per step', String(16))
    .option('--units <unit>', 'B, KiB, MiB or GiB', 'KiB')
    .option('--depth <n>', 'module levels shown in the module-wise tables (the model is level 1)', '2')
    .action(async (opts: DemoOptions) => {
      await runDemo(opts, (text) => process.stdout.write(`${text}\n`));
    });
}
