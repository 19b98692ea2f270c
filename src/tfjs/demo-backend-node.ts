/**
 * Loads TensorFlow.js in Node for memscope's demos (`memscope demo`, `memscope ops`) and its
 * tests, and selects a backend: 'cpu' (@tensorflow/tfjs-backend-cpu, which the union package
 * @tensorflow/tfjs brings along) or 'wasm' (@tensorflow/tfjs-backend-wasm, its .wasm binaries
 * read from the installed package).
 *
 * TFJS is the user's install, not memscope's (a peer dependency), so every TFJS package is
 * imported dynamically, resolved from memscope's own folder as a peer is: a package that is
 * missing becomes one MemscopeError naming what to install, never a module-resolution stack.
 */
import type * as TfCore from '@tensorflow/tfjs-core';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MemscopeError } from '../core/errors.js';

export const DEMO_BACKENDS = ['cpu', 'wasm'] as const;
export type DemoBackend = (typeof DEMO_BACKENDS)[number];

export function parseDemoBackend(value: unknown): DemoBackend {
  if ((DEMO_BACKENDS as readonly unknown[]).includes(value)) return value as DemoBackend;
  throw new MemscopeError('bad-backend', `--backend: unknown backend ${JSON.stringify(value)}; expected one of ${DEMO_BACKENDS.join(', ')}`);
}

/** What a user installs to get each piece, in the words of the message that asks for it. */
const INSTALL_TFJS = 'npm install @tensorflow/tfjs (or @tensorflow/tfjs-core, @tensorflow/tfjs-layers and a backend)';

/**
 * The packages that register each backend, in the order tried: the backend's own package, then
 * the union package, which registers cpu (and webgl, which Node cannot run) when imported.
 */
const BACKEND_PACKAGES: Record<DemoBackend, readonly string[]> = {
  cpu: ['@tensorflow/tfjs-backend-cpu', '@tensorflow/tfjs'],
  wasm: ['@tensorflow/tfjs-backend-wasm'],
};

/** Whether `err` says that `specifier` itself is not installed (not one of its own imports). */
function isMissingPackage(err: unknown, specifier: string): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e === null || typeof e !== 'object') return false;
  if (e.code !== 'ERR_MODULE_NOT_FOUND' && e.code !== 'MODULE_NOT_FOUND') return false;
  return typeof e.message === 'string' && e.message.includes(`'${specifier}'`);
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.split('\n', 1)[0]!;
}

/**
 * Imports an installed package: null when `specifier` itself is not installed; a one-line
 * MemscopeError when it is installed but fails to load (one of its own imports missing included).
 */
export async function importInstalled(specifier: string): Promise<unknown> {
  try {
    return (await import(specifier)) as unknown;
  } catch (err) {
    if (isMissingPackage(err, specifier)) return null;
    throw new MemscopeError('tfjs-load-failed', `cannot load ${specifier}: ${firstLine(err)}`, { cause: err });
  }
}

/** The installed memscope package's folder (dist/tfjs/ is two levels below it). */
function memscopeFolder(): string {
  return path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
}

/**
 * Whether `specifier` resolves from the working folder. A memscope installed elsewhere (globally,
 * or run through npx from the registry) resolves its peers from its own folder, not the project's.
 */
function installedInWorkingFolder(specifier: string): boolean {
  try {
    createRequire(path.join(process.cwd(), 'package.json')).resolve(specifier);
    return true;
  } catch {
    return false;
  }
}

let core: typeof TfCore | null = null;

/**
 * TFJS's core and layers, which the demo model needs whatever the backend. Resolved once; the
 * demo model's own imports of the two find the same modules.
 */
async function loadCoreAndLayers(): Promise<typeof TfCore> {
  if (core !== null) return core;
  const loaded = (await importInstalled('@tensorflow/tfjs-core')) as typeof TfCore | null;
  if (loaded === null) {
    if (installedInWorkingFolder('@tensorflow/tfjs-core')) {
      throw new MemscopeError(
        'tfjs-missing',
        `TensorFlow.js is installed in this folder but not where memscope runs from (${memscopeFolder()}): ` +
          'npm install memscope in this project and run npx memscope, so both resolve the same TensorFlow.js',
      );
    }
    throw new MemscopeError('tfjs-missing', `TensorFlow.js is not installed, and the built-in model runs on it: ${INSTALL_TFJS}`);
  }
  if ((await importInstalled('@tensorflow/tfjs-layers')) === null) {
    throw new MemscopeError(
      'tfjs-missing',
      `@tensorflow/tfjs-layers is not installed, and the built-in model is made of its layers: npm install @tensorflow/tfjs-layers@${loaded.version_core}`,
    );
  }
  core = loaded;
  return core;
}

/** Whether `name`'s backend is registered with the core memscope loaded, importing its package if needed. */
async function registerBackend(tf: typeof TfCore, name: DemoBackend): Promise<boolean> {
  if (tf.findBackendFactory(name) !== null) return true;
  for (const specifier of BACKEND_PACKAGES[name]) {
    if ((await importInstalled(specifier)) === null) continue;
    if (tf.findBackendFactory(name) !== null) return true;
    throw new MemscopeError(
      'tfjs-version-mismatch',
      `${specifier} is installed but registered its '${name}' backend with another copy of @tensorflow/tfjs-core than ` +
        `the one memscope loaded (${tf.version_core}): install matching versions (npm ls @tensorflow/tfjs-core shows the copies)`,
    );
  }
  return false;
}

function installHint(name: DemoBackend): string {
  return name === 'cpu' ? 'npm install @tensorflow/tfjs-backend-cpu (or @tensorflow/tfjs)' : 'npm install @tensorflow/tfjs-backend-wasm';
}

/**
 * The backend the demos use when none is asked for: the first of cpu, wasm whose package is
 * installed. Refuses, naming what to install, when TFJS or both backends are missing.
 */
export async function defaultDemoBackend(): Promise<DemoBackend> {
  const tf = await loadCoreAndLayers();
  for (const name of DEMO_BACKENDS) if (await registerBackend(tf, name)) return name;
  throw new MemscopeError(
    'tfjs-backend-missing',
    `no TensorFlow.js backend that runs in Node is installed: npm install @tensorflow/tfjs-backend-cpu (or @tensorflow/tfjs, or @tensorflow/tfjs-backend-wasm)`,
  );
}

let wasmPathsSet = false;

async function prepareWasm(): Promise<void> {
  if (wasmPathsSet) return;
  const wasm = (await importInstalled('@tensorflow/tfjs-backend-wasm')) as { setWasmPaths(prefix: string): void };
  const require = createRequire(import.meta.url);
  const wasmFile = require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm');
  wasm.setWasmPaths(path.dirname(wasmFile) + path.sep);
  wasmPathsSet = true;
}

/** Loads TFJS and makes `name` the active backend; one-line MemscopeError naming what to install when it cannot. */
export async function useDemoBackend(name: DemoBackend): Promise<void> {
  const tf = await loadCoreAndLayers();
  if (!(await registerBackend(tf, name))) {
    throw new MemscopeError('tfjs-backend-missing', `the '${name}' backend is not installed: ${installHint(name)}`);
  }
  if (name === 'wasm') await prepareWasm();
  // memscope's own demos print tables; TFJS's "install tfjs-node" banner (a
  // console.warn on the cpu backend's first write) would land in the middle of
  // them. PROD silences TFJS warnings; the demos need none of its debug checks.
  tf.env().set('PROD', true);
  const ok = await tf.setBackend(name);
  if (!ok || tf.getBackend() !== name) {
    throw new MemscopeError('backend-unavailable', `TFJS backend '${name}' failed to initialise in this process`);
  }
}
