import path from 'node:path';
import type { Command } from 'commander';
import { MemscopeError } from '../../core/errors.js';

export interface OpsOptions {
  backend: string;
  outDir: string;
  steps: string;
  top: string;
  stats?: string;
  allocator?: boolean;
  allocatorConf?: string;
  capacity?: string;
}

function positiveInteger(value: string, flag: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min) {
    throw new MemscopeError('bad-argument', `ops: ${flag} must be an integer ≥ ${min}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * Trains the built-in demo model under the operator-level MemoryTracker,
 * prints the top-operator summary and writes the plots (and the stats JSON).
 */
export async function runOps(opts: OpsOptions, print: (line: string) => void): Promise<{ html: string; stats: string }> {
  const steps = positiveInteger(opts.steps, '--steps', 1);
  const top = positiveInteger(opts.top, '--top', 0);
  // TFJS is loaded only when the command runs, so other verbs start fast.
  const { parseDemoBackend, useDemoBackend } = await import('../../tfjs/demo-backend-node.js');
  const backend = parseDemoBackend(opts.backend);
  await useDemoBackend(backend);
  const { createDemoRun } = await import('../../tfjs/demo-model.js');
  const { MemoryTracker } = await import('../../tfjs/memory-tracker.js');

  // The caching-allocator model sees every storage from before the model is
  // built, and gives the tracker PyTorch's reserved figure plus retries/OOMs.
  const useAllocator = opts.allocator || opts.allocatorConf !== undefined || opts.capacity !== undefined;
  let binding: import('../../allocator/binding.js').AllocatorBinding | null = null;
  let bindingSession: { detach(): void } | null = null;
  if (useAllocator) {
    const capacityMiB = opts.capacity === undefined ? undefined : positiveInteger(opts.capacity, '--capacity', 1);
    const { AllocatorBinding } = await import('../../allocator/binding.js');
    const { tfjsAdapter } = await import('../../tfjs/adapter.js');
    binding = new AllocatorBinding({
      settings: opts.allocatorConf,
      capacity: capacityMiB === undefined ? undefined : capacityMiB * 1024 * 1024,
      devices: [backend],
    });
    bindingSession = binding.attach(tfjsAdapter);
  }
  const tracker = new MemoryTracker(binding ? { reservedSource: binding } : {});
  let losses: number[];
  try {
    const run = createDemoRun();
    try {
      losses = tracker.track(run.model, () => run.train(steps), { optimizer: run.optimizer });
    } finally {
      run.dispose();
    }
  } finally {
    bindingSession?.detach();
  }
  print(`memscope ops: ${steps} training step(s) of the demo model (Dense → BatchNorm → Dense, Adam) on ${backend}; loss ${losses.map((l) => l.toFixed(4)).join(' → ')}`);
  print(tracker.summaryString(top));
  const written = tracker.showTraces(opts.outDir, top);
  const statsFile = opts.stats ?? path.join(opts.outDir, 'memory_traces.json');
  tracker.saveStats(statsFile);
  print(`plots: ${written.html}`);
  for (const svg of written.svgs) print(`       ${svg}`);
  print(`stats: ${statsFile}`);
  return { html: written.html, stats: statsFile };
}

export function register(program: Command): void {
  program
    .command('ops')
    .description("operator-level memory traces (PyTorch's MemoryTracker) of the built-in demo: summary and plots")
    .option('--backend <name>', 'TFJS backend: cpu or wasm', 'cpu')
    .option('-o, --out-dir <dir>', 'directory for the SVG plots, memory_traces.html and memory_traces.json', 'memscope-ops')
    .option('--steps <n>', 'training steps', '2')
    .option('--top <n>', 'operators in the summary', '20')
    .option('--stats <file>', 'where to save the stats JSON (default <out-dir>/memory_traces.json)')
    .option('--allocator', "take reserved bytes, retries and OOMs from memscope's caching-allocator model (PyTorch's CUDA allocator)")
    .option('--allocator-conf <conf>', 'PYTORCH_CUDA_ALLOC_CONF-style settings for the allocator model (implies --allocator)')
    .option('--capacity <MiB>', 'device capacity for the allocator model, in MiB (implies --allocator)')
    .action(async (opts: OpsOptions) => {
      await runOps(opts, (line) => process.stdout.write(`${line}\n`));
    });
}
