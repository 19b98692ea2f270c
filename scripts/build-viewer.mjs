#!/usr/bin/env node
// Bundles the report viewer (src/viewer/app) into dist/viewer/app.js, the one
// script `memscope report` inlines into every report page. The app reads dropped files with the
// platform-free readers of src/torch and src/capture; bundling for the browser makes any Node
// import that reaches it fail the build instead of the page. Runs after tsc, with the same
// bundling as a report made from source (src/viewer/bundle-node.ts).
import { writeFileSync } from 'node:fs';
import { buildViewerBundle } from '../dist/viewer/bundle-node.js';
writeFileSync('dist/viewer/app.js', await buildViewerBundle('src/viewer/app/main.ts'));
