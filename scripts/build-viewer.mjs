#!/usr/bin/env node
// Bundles the report viewer (src/viewer/app) into dist/viewer/app.js, the one
// script `memscope report` inlines into every report page.
import { build } from 'esbuild';
await build({
  entryPoints: ['src/viewer/app/main.ts'],
  outfile: 'dist/viewer/app.js',
  bundle: true,
  format: 'iife',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
});
