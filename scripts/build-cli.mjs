#!/usr/bin/env node
// Bundles the CLI's entry (src/cli/main.ts) and the verbs that read PyTorch files into
// dist/cli/memscope.js, the `memscope` bin, plus one chunk per verb beside it.
//
// Why: `memscope summary big.pickle` is often a one-shot command, and Node's ESM loader resolves,
// reads and links each module on its own: ~35 files for the snapshot verbs cost ~25 ms of a
// ~0.2 s run on a small file (docs/PICKLE.md, eleventh session). The rest of the CLI (the TFJS
// verbs, the report viewer, `run`'s preload) finds files next to its own modules through
// import.meta.url, so it stays the tsc output in dist/: main loads it through
// ./commands/index.js, left external here. MemscopeError stays external as well, so that an
// error thrown by either half is the one class main.ts tests for.
import { build } from 'esbuild';
import { readdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const errorsModule = fileURLToPath(new URL('../src/core/errors.ts', import.meta.url));

/** Leaves an import to the tsc output in dist/ (paths relative to dist/cli/). */
const keepOutside = {
  name: 'keep-outside',
  setup(b) {
    b.onResolve({ filter: /^\.\/commands\/index\.js$/ }, (args) =>
      args.importer.endsWith('/src/cli/main.ts') ? { path: './commands/index.js', external: true } : undefined,
    );
    b.onResolve({ filter: /core\/errors\.js$|^\.\/errors\.js$/ }, async (args) => {
      const resolved = await b.resolve(args.path.replace(/\.js$/, '.ts'), { resolveDir: args.resolveDir, kind: args.kind });
      return resolved.path === errorsModule ? { path: '../core/errors.js', external: true } : undefined;
    });
  },
};

// Chunk names carry a content hash: drop the previous build's.
for (const name of readdirSync('dist/cli')) if (/^memscope-\w+\.js$/.test(name)) rmSync(`dist/cli/${name}`);

await build({
  entryPoints: { memscope: 'src/cli/main.ts' },
  outdir: 'dist/cli',
  chunkNames: 'memscope-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  // commander and picocolors go into the bundle too (CommonJS, reached through the ESM loader's
  // CommonJS translation otherwise: ~10 more files resolved, read and wrapped at every start,
  // ~12 ms of a ~150 ms run on a small file); their `require`s of Node's built-ins get a real
  // `require`. The verbs outside the bundle (`run`, `report`) import commander's package for
  // InvalidArgumentError: a second copy, which is fine, since commander tells that error by its
  // `code`, not by its class. Everything else stays a package.
  external: ['@tensorflow/*', 'cli-table3'],
  banner: { js: "import { createRequire as __memscopeRequire } from 'node:module'; const require = __memscopeRequire(import.meta.url);" },
  plugins: [keepOutside],
  legalComments: 'none',
});
