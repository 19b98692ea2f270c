#!/usr/bin/env node
// The `memscope` bin (dist/cli/memscope.cjs, bundled by scripts/build-cli.mjs). The CLI itself is
// one CommonJS bundle beside it, memscope-cli.cjs: src/cli/cli.ts with the PyTorch-file verbs,
// commander and picocolors. It runs through a V8 code cache, one per verb, so a run after the
// first skips parsing and compiling most of it (src/cli/compile-cache.ts). The other verbs are
// tsc's ES modules in dist/, imported from here: code run by `vm.Script` cannot `import()`.
import { fileURLToPath } from 'node:url';
import type { runCli } from './cli.js';
import { compileCacheDir, runWithCompileCache } from './compile-cache.js';
import { PYTORCH_FILE_VERBS } from './verbs.js';

const verb = process.argv[2];
const bundle = runWithCompileCache(fileURLToPath(new URL('./memscope-cli.cjs', import.meta.url)), {
  cacheDir: compileCacheDir(),
  variant: verb !== undefined && (PYTORCH_FILE_VERBS as readonly string[]).includes(verb) ? verb : 'other',
});
if (process.env['MEMSCOPE_COMPILE_CACHE_REPORT'] === '1') process.stderr.write(`memscope: compile cache ${bundle.cache}\n`);
// Not awaited: the bin is CommonJS. runCli reports every error itself (one line on stderr) and
// sets the exit code.
void (bundle.exports as { runCli: typeof runCli }).runCli(process.argv, () => import('./commands/index.js'));
