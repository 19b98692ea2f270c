import { spawn } from 'node:child_process';
import { basename, resolve } from 'node:path';
import type { Command } from 'commander';
import { findLeaks } from '../../capture/leaks.js';
import { readCaptureFile } from '../../capture/read-node.js';
import { leaksJson } from './leaks.js';
import { nonNegativeInt } from '../options.js';
import { requireReadableFile } from '../../core/input-file.js';

export interface RunOptions {
  output?: string;
  stacks?: boolean;
  maxEntries?: number;
  backend?: string;
  quiet?: boolean;
  json?: boolean;
}

/** The preload module next to this file (dist/cli/run-preload.js, or the .ts source under tsx). */
function preloadUrl(): { url: string; fromSource: boolean } {
  const fromSource = import.meta.url.endsWith('.ts');
  return { url: new URL(`../run-preload.${fromSource ? 'ts' : 'js'}`, import.meta.url).href, fromSource };
}

/**
 * Runs `script` in a child Node process with the capture preload installed
 * and returns its exit code. The child inherits stdio; the capture goes to `output`.
 */
export async function runWithCapture(script: string, args: string[], opts: RunOptions): Promise<{ exitCode: number; output: string }> {
  const scriptPath = resolve(script);
  requireReadableFile(script);
  const maxEntries = opts.maxEntries ?? null;
  const output = resolve(opts.output ?? `memscope-${basename(scriptPath).replace(/\.[cm]?[jt]s$/, '')}.${process.pid}.capture.ndjson`);
  const { url, fromSource } = preloadUrl();
  const nodeArgs: string[] = [];
  // Developing from source: the preload is TypeScript, so the child needs tsx's loader too.
  if (fromSource) nodeArgs.push('--import', import.meta.resolve('tsx'));
  nodeArgs.push('--import', url, scriptPath, ...args);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    MEMSCOPE_RUN_OUTPUT: output,
    MEMSCOPE_RUN_ARGV: JSON.stringify([scriptPath, ...args]),
    MEMSCOPE_RUN_STACKS: opts.stacks ? '1' : '0',
    MEMSCOPE_RUN_MAX_ENTRIES: maxEntries === null ? '' : String(maxEntries),
    MEMSCOPE_RUN_BACKEND: opts.backend ?? '',
  };
  // With --json, memscope's stdout carries only the JSON: the program's own output goes to stderr.
  const child = spawn(process.execPath, nodeArgs, { stdio: ['inherit', opts.json ? 'pipe' : 'inherit', 'inherit'], env });
  child.stdout?.pipe(process.stderr);
  // Ctrl-C reaches the child through the terminal's process group; the parent just waits for it.
  const ignore = (): void => {};
  process.on('SIGINT', ignore);
  try {
    const exitCode = await new Promise<number>((res, rej) => {
      child.on('error', rej);
      child.on('exit', (code, signal) => res(code ?? (signal ? 128 + (signalNumber(signal) ?? 0) : 1)));
    });
    return { exitCode, output };
  } finally {
    process.removeListener('SIGINT', ignore);
  }
}


function signalNumber(signal: NodeJS.Signals): number | undefined {
  return { SIGINT: 2, SIGKILL: 9, SIGTERM: 15 }[signal as string];
}

export function register(program: Command): void {
  // The script's own options (`run train.js --epochs 3`) must pass through untouched.
  program.enablePositionalOptions();
  program
    .command('run')
    .description('run a TensorFlow.js Node program unchanged and stream a memory capture to disk')
    .argument('<script>', 'the program to run')
    .argument('[args...]', 'arguments passed to the program')
    .option('-o, --output <file>', 'capture file (default memscope-<script>.<pid>.capture.ndjson)')
    .option('--stacks', 'record the JS stack of every allocation (slower; needed to locate leaks by line)')
    .option('--max-entries <n>', 'record at most N allocations individually; later ones only count in step totals', (v: string) => nonNegativeInt(v, '--max-entries'))
    .option('--backend <name>', 'TFJS backend to make current before the program starts (cpu, wasm, ...)')
    .option('-q, --quiet', 'do not print where the capture went')
    .option('--json', "when the program ends, print its exit code, the capture's path and the leaks found as JSON (the program's stdout goes to stderr)")
    .passThroughOptions()
    .action(async (script: string, args: string[], opts: RunOptions) => {
      const { exitCode, output } = await runWithCapture(script, args, opts);
      if (opts.json) {
        const report = findLeaks(readCaptureFile(output));
        process.stdout.write(JSON.stringify({ exitCode, ...leaksJson(report, output) }, null, 2) + '\n');
      } else if (!opts.quiet) {
        process.stderr.write(`memscope: capture written to ${output}\n  next: memscope report ${output} -o report.html · memscope leaks ${output}\n`);
      }
      process.exitCode = exitCode;
    });
}
