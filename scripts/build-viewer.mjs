#!/usr/bin/env node
// Bundles the report viewer (src/viewer/app) into dist/viewer/app.js, the one
// script `memscope report` inlines into every report page. The app reads dropped files with the
// platform-free readers of src/torch and src/capture; bundling for the browser makes any Node
// import that reaches it fail the build instead of the page.
import { build } from 'esbuild';
await build({
  entryPoints: ['src/viewer/app/main.ts'],
  outfile: 'dist/viewer/app.js',
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: 'es2020',
  minify: true,
  legalComments: 'none',
});
