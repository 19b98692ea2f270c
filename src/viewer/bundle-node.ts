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
  let esbuild: typeof import('esbuild');
  try {
    esbuild = await import('esbuild');
  } catch {
    throw new MemscopeError('no-viewer', 'the report viewer is not built (dist/viewer/app.js missing) and esbuild is not installed to build it: run `npm run build`');
  }
  const out = await esbuild.build({ entryPoints: [source], bundle: true, write: false, format: 'iife', target: 'es2020', minify: true, legalComments: 'none' });
  return out.outputFiles[0].text;
}
