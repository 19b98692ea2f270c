import type { Command } from 'commander';
import { findLeaks } from '../../capture/leaks.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { requireReadableFile } from '../../core/input-file.js';
import { nonNegativeInt } from '../options.js';
import { finishPlainRun, RunRefusal, runWithCapture, type RunOptions } from '../run-child.js';
import { MemscopeError } from '../../core/errors.js';
import { leaksJson } from './leaks.js';

/**
 * What `memscope run` prints once the program has ended, and its exit code: the program's. The
 * bin's fast path (src/cli/bin.ts) ends here too, after running the child itself.
 */
export async function finishRun(exitCode: number, output: string, opts: RunOptions): Promise<void> {
  if (!opts.json) return finishPlainRun(exitCode, output, opts);
  const report = findLeaks(await readCaptureFile(output));
  process.stdout.write(JSON.stringify({ exitCode, ...leaksJson(report, output) }, null, 2) + '\n');
  process.exitCode = exitCode;
}

export function register(program: Command): void {
  // The script's own options (`run train.js --epochs 3`) must pass through untouched.
  program.enablePositionalOptions();
  program
    .command('run')
    .description('run a TensorFlow.js Node program unchanged and stream a memory capture to disk')
    .argument('<script>', 'the program to run')
    .argument('[args...]', 'arguments passed to the program')
    .option('-o, --output <file>', 'capture file (default memscope-<script>.<pid>.capture.ndjson; a name ending in .gz is written gzipped)')
    .option('--stacks', 'record the JS stack of every allocation (slower; needed to locate leaks by line)')
    .option('--max-entries <n>', 'record at most N allocations individually; later ones only count in step totals', (v: string) => nonNegativeInt(v, '--max-entries'))
    .option('--backend <name>', 'TFJS backend to make current before the program starts (cpu, wasm, ...)')
    .option('-q, --quiet', 'do not print where the capture went')
    .option('--json', "when the program ends, print its exit code, the capture's path and the leaks found as JSON (the program's stdout goes to stderr)")
    .passThroughOptions()
    .action(async (script: string, args: string[], opts: RunOptions) => {
      requireReadableFile(script);
      let run: { exitCode: number; output: string };
      try {
        run = await runWithCapture(script, args, opts);
      } catch (err) {
        throw err instanceof RunRefusal ? new MemscopeError('write-failed', err.message) : err;
      }
      const { exitCode, output } = run;
      await finishRun(exitCode, output, opts);
    });
}
