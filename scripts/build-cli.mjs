#!/usr/bin/env node
// The bundle saves 33 % of the CPU of `memscope summary small_3seg.pickle --json`: paired runs against tsc's ES modules (dist/cli/main.js).
// Builds the `memscope` bin: dist/cli/memscope.cjs (src/cli/bin.ts) and the bundle it runs for the
// verbs that read PyTorch files, dist/cli/memscope-cli.cjs (src/cli/pytorch-file-cli.ts with those
// verbs, commander and picocolors). Both CommonJS: the bin, because Node starts a CommonJS entry
// ~10 ms sooner than an ES module one (its ESM loader is not set up); the bundle, because the bin
// runs it through a V8 code cache (src/cli/compile-cache.ts), which Node 20 offers only for scripts.
//
// Why a bundle: `memscope summary FILE` is often a one-shot command, and Node's ESM loader
// resolves, reads and links each module on its own (~35 files for these verbs). The rest of the CLI (the TFJS verbs, the
// report viewer, `run`'s preload) finds files next to its own modules through import.meta.url, so
// it stays the tsc output in dist/, which the bin imports instead of the bundle: a process never
// holds both, so memscope has one MemscopeError class in it.
import { build } from 'esbuild';
import { readdirSync, readFileSync, rmSync } from 'node:fs';

// Earlier layouts' files: an ES module bin (memscope.js) and its chunks (memscope-<hash>.js).
for (const name of readdirSync('dist/cli')) if (/^memscope(-\w+)?\.js$/.test(name)) rmSync(`dist/cli/${name}`);

/** `import.meta.url` in CommonJS output: the file's URL, defined after the bundle's "use strict". */
const importMetaUrl = { inject: ['scripts/cjs-import-meta-url.js'], define: { 'import.meta.url': 'importMetaUrl' } };

const common = { bundle: true, platform: 'node', target: 'node20', legalComments: 'none', logLevel: 'warning' };

await build({
  ...common,
  entryPoints: ['src/cli/pytorch-file-cli.ts'],
  outfile: 'dist/cli/memscope-cli.cjs',
  format: 'cjs',
  // commander and picocolors go into the bundle too (reached through the ESM loader's CommonJS
  // translation otherwise: ~10 more files resolved, read and wrapped at every start, ~12 ms of a
  // ~150 ms run on a small file). Everything else stays a package.
  external: ['@tensorflow/*', 'cli-table3'],
  // Modules that load a built-in lazily do it with createRequire(import.meta.url).
  ...importMetaUrl,
});
// Code run by vm.Script cannot `import()` (Node 20 has no loader for it that survives a code
// cache): a dynamic import in the bundle would only fail when a user's file reaches it.
const bundled = readFileSync('dist/cli/memscope-cli.cjs', 'utf8');
const dynamicImport = /\bimport\(/.exec(bundled);
if (dynamicImport) {
  const line = bundled.slice(0, dynamicImport.index).split('\n').length;
  throw new Error(`dist/cli/memscope-cli.cjs:${line}: a dynamic import() in the CLI bundle; load it with require (createRequire) instead`);
}

/**
 * Leaves the full registry, and what `memscope run --json` reads the capture with, to the tsc
 * output in dist/ (paths relative to dist/cli/).
 */
const registryOutside = {
  name: 'registry-outside',
  setup(b) {
    b.onResolve({ filter: /^\.\/(main|commands\/run|cli)\.js$/ }, (args) => ({ path: args.path, external: true }));
  },
};

await build({
  ...common,
  entryPoints: ['src/cli/bin.ts'],
  outfile: 'dist/cli/memscope.cjs',
  format: 'cjs',
  // bin.ts finds its neighbours through import.meta.url, as an ES module (tsc's dist/cli/bin.js).
  ...importMetaUrl,
  // `import()` of the registry stays a real dynamic import in CommonJS (the registry is ESM).
  plugins: [registryOutside],
});
