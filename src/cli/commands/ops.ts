import path from 'node:path';
import { Option, type Command } from 'commander';
import type { OpTraceSummary } from '../../tracking/op-traces.js';
import { byteSize, nonNegativeInt, optionWithDefault, positiveInt, usageOf } from '../options.js';

export interface OpsOptions {
  backend: string;
  outDir: string;
  steps: string;
  top: string;
  stats?: string;
  allocator?: boolean;
  /** PYTORCH_CUDA_ALLOC_CONF-style settings (`--alloc-conf`, as `memscope replay` spells it). */
  allocConf?: string;
  /** The earlier spelling of `--alloc-conf`, still accepted and hidden from help. */
  allocatorConf?: string;
  /** Bytes, with binary units: '24GiB', '512MiB', or plain bytes. */
  capacity?: string;
  json?: boolean;
}

/** What `memscope ops --json` prints: the operator summary and where the plots and stats went. */
export interface OpsJson {
  readonly backend: string;
  readonly steps: number;
  readonly losses: readonly number[];
  readonly summary: OpTraceSummary;
  readonly plots: { readonly html: string; readonly svgs: readonly string[] };
  readonly stats: string;
}

/**
 * Trains the built-in demo model under the operator-level MemoryTracker,
 * prints the top-operator summary and writes the plots (and the stats JSON).
 */
export async function runOps(opts: OpsOptions, print: (line: string) => void): Promise<{ html: string; stats: string }> {
  const steps = positiveInt(opts.steps, '--steps');
  const top = nonNegativeInt(opts.top, '--top');
  const capacity = opts.capacity === undefined ? undefined : byteSize(opts.capacity, '--capacity');
  const allocConf = opts.allocConf ?? opts.allocatorConf;
  if (allocConf !== undefined) {
    const { parseAllocatorConf } = await import('../../allocator/settings.js');
    usageOf(() => parseAllocatorConf(allocConf));
  }
  // TFJS is loaded only when the command runs, so other verbs start fast.
  const { parseDemoBackend, useDemoBackend } = await import('../../tfjs/demo-backend-node.js');
  const backend = usageOf(() => parseDemoBackend(opts.backend));
  await useDemoBackend(backend);
  const { createDemoRun } = await import('../../tfjs/demo-model.js');
  const { MemoryTracker } = await import('../../tfjs/memory-tracker.js');

  // The caching-allocator model sees every storage from before the model is
  // built, and gives the tracker PyTorch's reserved figure plus retries/OOMs.
  const useAllocator = opts.allocator || allocConf !== undefined || capacity !== undefined;
  let binding: import('../../allocator/binding.js').AllocatorBinding | null = null;
  let bindingSession: { detach(): void } | null = null;
  if (useAllocator) {
    const { AllocatorBinding } = await import('../../allocator/binding.js');
    const { tfjsAdapter } = await import('../../tfjs/adapter.js');
    binding = new AllocatorBinding({
      settings: allocConf,
      capacity,
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
  const written = tracker.showTraces(opts.outDir, top);
  const statsFile = opts.stats ?? path.join(opts.outDir, 'memory_traces.json');
  tracker.saveStats(statsFile);
  if (opts.json) {
    const json: OpsJson = { backend, steps, losses, summary: tracker.summary(top), plots: { html: written.html, svgs: written.svgs }, stats: statsFile };
    print(JSON.stringify(json, null, 2));
    return { html: written.html, stats: statsFile };
  }
  print(`memscope ops: ${steps} training step(s) of the demo model (Dense → BatchNorm → Dense, Adam) on ${backend}; loss ${losses.map((l) => l.toFixed(4)).join(' → ')}`);
  print(tracker.summaryString(top));
  print(`plots: ${written.html}`);
  for (const svg of written.svgs) print(`       ${svg}`);
  print(`stats: ${statsFile}`);
  return { html: written.html, stats: statsFile };
}

export function register(program: Command): void {
  program
    .command('ops')
    .description("operator-level memory traces (PyTorch's MemoryTracker) of the built-in demo: summary and plots")
    .addOption(optionWithDefault('--backend <name>', 'TFJS backend: cpu or wasm', 'cpu'))
    .addOption(optionWithDefault('-o, --out-dir <dir>', 'directory for the SVG plots, memory_traces.html and memory_traces.json', 'memscope-ops'))
    .addOption(optionWithDefault('--steps <n>', 'training steps', '2'))
    .addOption(optionWithDefault('--top <n>', 'operators in the summary', '20'))
    .option('--stats <file>', 'where to save the stats JSON (default <out-dir>/memory_traces.json)')
    .option('--allocator', "take reserved bytes, retries and OOMs from memscope's caching-allocator model (PyTorch's CUDA allocator)")
    .option('--alloc-conf <conf>', 'PYTORCH_CUDA_ALLOC_CONF-style settings for the allocator model, e.g. expandable_segments:True (implies --allocator)')
    .addOption(new Option('--allocator-conf <conf>', 'the earlier spelling of --alloc-conf').hideHelp())
    .option('--capacity <bytes>', 'device capacity for the allocator model, e.g. 24GiB or 512MiB; a plain number is bytes (implies --allocator)')
    .option('--json', 'print the operator summary, and where the plots and stats went, as JSON')
    .action(async (opts: OpsOptions) => {
      await runOps(opts, (line) => process.stdout.write(`${line}\n`));
    });
}
