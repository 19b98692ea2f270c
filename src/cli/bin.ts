#!/usr/bin/env node
// The `memscope` bin (dist/cli/memscope.cjs, bundled by scripts/build-cli.mjs). The CLI itself is
// one CommonJS bundle beside it, memscope-cli.cjs: src/cli/cli.ts with the PyTorch-file verbs,
// commander and picocolors. It runs through a V8 code cache, one per verb, so a run after the
// first skips parsing and compiling most of it (src/cli/compile-cache.ts). The other verbs are
// tsc's ES modules in dist/, imported from here: code run by `vm.Script` cannot `import()`.
//
// `memscope run` with plainly right arguments starts its child from here, before any of that
// loads (src/cli/run-child.ts): the parent's start-up would otherwise add to the program's.
import { fileURLToPath } from 'node:url';
import type { reportError, runCli } from './cli.js';
import type { finishRun } from './commands/run.js';
import { compileCacheDir, runWithCompileCache } from './compile-cache.js';
import { finishPlainRun, parseRunArgs, runWithCapture, type RunRequest } from './run-child.js';
import { PYTORCH_FILE_VERBS } from './verbs.js';

const verb = process.argv[2];
const runRequest = verb === 'run' ? parseRunArgs(process.argv.slice(3)) : null;
if (runRequest) void runFast(runRequest);
else runCommand();

/** The fast path of `memscope run`. */
async function runFast({ script, args, opts }: RunRequest): Promise<void> {
  let result: { exitCode: number; output: string };
  try {
    result = await runWithCapture(script, args, opts);
  } catch (err) {
    process.stderr.write(`memscope: cannot start ${process.execPath}: ${err instanceof Error ? err.message : String(err)}\n`);
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
    run.finishRun(result.exitCode, result.output, opts);
  } catch (err) {
    process.exitCode = cli.reportError(err, 'run');
  }
}

function runCommand(): void {
  const bundle = runWithCompileCache(fileURLToPath(new URL('./memscope-cli.cjs', import.meta.url)), {
    cacheDir: compileCacheDir(),
    variant: verb !== undefined && (PYTORCH_FILE_VERBS as readonly string[]).includes(verb) ? verb : 'other',
  });
  if (process.env['MEMSCOPE_COMPILE_CACHE_REPORT'] === '1') process.stderr.write(`memscope: compile cache ${bundle.cache}\n`);
  // Not awaited: the bin is CommonJS. runCli reports every error itself (one line on stderr) and
  // sets the exit code.
  void (bundle.exports as { runCli: typeof runCli }).runCli(process.argv, () => import('./commands/index.js'));
}
