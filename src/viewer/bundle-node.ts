import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { MemscopeError } from '../core/errors.js';

/**
 * The viewer app as one browser script. `npm run build` writes it to
 * dist/viewer/app.js (scripts/build-viewer.mjs); when running from source
 * (tsx) or before a build, it is bundled on the spot with esbuild's JS API.
 */
export async function viewerBundle(): Promise<string> {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const prebuilt = `${here}app.js`;
  if (!import.meta.url.endsWith('.ts') && existsSync(prebuilt)) return readFileSync(prebuilt, 'utf8');
  const entry = fileURLToPath(new URL('./app/main.ts', import.meta.url));
  const source = existsSync(entry) ? entry : fileURLToPath(new URL('../../src/viewer/app/main.ts', import.meta.url));
  return buildViewerBundle(source);
}

/**
 * Bundles the app at `entry` (src/viewer/app/main.ts) into one minified browser script; the build
 * (scripts/build-viewer.mjs) writes it to dist/viewer/app.js.
 */
export async function buildViewerBundle(entry: string): Promise<string> {
  let esbuild: typeof import('esbuild');
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new MemscopeError('no-viewer', 'the report viewer is not built (dist/viewer/app.js missing) and esbuild is not installed to build it: run `npm run build`');
  }
  const out = await esbuild.build({ entryPoints: [entry], bundle: true, write: false, format: 'iife', platform: 'browser', target: 'es2020', minify: true, legalComments: 'none' });
  return eagerWrapper(out.outputFiles[0]!.text);
}

/**
 * The bundle with its wrapper written `(function(){…})()`, not esbuild's `(()=>{…})()`: V8
 * compiles a parenthesised `function` at once with the script, but parses an arrow function's
 * body a second time when it is called, and here that body is the whole app, parsed before a
 * report's first frame (docs/ARCHITECTURE.md, "Performance devices"). The wrapper has neither
 * `this` nor `arguments` to change meaning.
 */
function eagerWrapper(js: string): string {
  const arrow = /^("use strict";)?\(\(\)=>\{/.exec(js);
  return arrow ? `${arrow[1] ?? ''}(function(){${js.slice(arrow[0].length)}` : js;
}
