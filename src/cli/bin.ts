#!/usr/bin/env node
// The `memscope` bin (dist/cli/memscope.cjs, bundled by scripts/build-cli.mjs). It picks one of
// three ways to run a command, so that each process holds one copy of memscope's modules (one
// MemscopeError class) and loads no more of them than its command needs:
// - `memscope run` with plainly right arguments starts the program from here, before commander
//   or any verb loads (src/cli/run-child.ts): the parent's start-up would otherwise add to the
//   program's.
// - The verbs that read PyTorch files run from one CommonJS bundle beside this file,
//   memscope-cli.cjs (src/cli/pytorch-file-cli.ts with those verbs, commander and picocolors), through
//   a V8 code cache (src/cli/compile-cache.ts): one file instead of ~35 ES modules.
// - Everything else (the other verbs, help, --version) is the CLI from tsc's output,
//   dist/cli/main.js.
import { fileURLToPath } from 'node:url';
import type { reportError } from './cli.js';
import type { finishRun } from './commands/run.js';
import { compileCacheDir, runWithCompileCache } from './compile-cache.js';
import type { runPytorchFileVerb } from './pytorch-file-cli.js';
import { finishPlainRun, parseRunArgs, RunRefusal, runWithCapture, type RunRequest } from './run-child.js';
import { PYTORCH_FILE_VERBS } from './verbs.js';

const verb = process.argv[2];
const runRequest = verb === 'run' ? parseRunArgs(process.argv.slice(3)) : null;
if (runRequest) void runFast(runRequest);
else if (verb !== undefined && (PYTORCH_FILE_VERBS as readonly string[]).includes(verb)) runPytorchFileCommand(verb);
// Not awaited: the bin is CommonJS. main.js runs the command when it loads; it reports every
// error itself (one line on stderr) and sets the exit code.
else void import('./main.js');

/** The fast path of `memscope run`. */
async function runFast({ script, args, opts }: RunRequest): Promise<void> {
  let result: { exitCode: number; output: string };
  try {
    result = await runWithCapture(script, args, opts);
  } catch (err) {
    const line = err instanceof RunRefusal ? err.message : `cannot start ${process.execPath}: ${err instanceof Error ? err.message : String(err)}`;
    process.stderr.write(`memscope: ${line}\n`);
    process.exitCode = 1;
    return;
  }
  if (!opts.json) return finishPlainRun(result.exitCode, result.output, opts);
  // The leak report needs the capture reader and the leak finder: tsc's modules in dist/, with
  // the CLI's one-line error report.
  const [run, cli] = await Promise.all([
    import('./commands/run.js') as Promise<{ finishRun: typeof finishRun }>,
    import('./cli.js') as Promise<{ reportError: typeof reportError }>,
  ]);
  try {
    await run.finishRun(result.exitCode, result.output, opts);
  } catch (err) {
    process.exitCode = cli.reportError(err, 'run');
  }
}

function runPytorchFileCommand(verb: string): void {
  const bundle = runWithCompileCache(fileURLToPath(new URL('./memscope-cli.cjs', import.meta.url)), { cacheDir: compileCacheDir(), variant: verb });
  if (process.env['MEMSCOPE_COMPILE_CACHE_REPORT'] === '1') process.stderr.write(`memscope: compile cache ${bundle.cache}\n`);
  void (bundle.exports as { runPytorchFileVerb: typeof runPytorchFileVerb }).runPytorchFileVerb(process.argv);
}
