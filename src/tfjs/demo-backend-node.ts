/**
 * Selects a TFJS backend in Node for memscope's demos and tests: 'cpu', or
 * 'wasm' with its .wasm binaries read from the installed package.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { MemscopeError } from '../core/errors.js';

export const DEMO_BACKENDS = ['cpu', 'wasm'] as const;
export type DemoBackend = (typeof DEMO_BACKENDS)[number];

export function parseDemoBackend(value: unknown): DemoBackend {
  if ((DEMO_BACKENDS as readonly unknown[]).includes(value)) return value as DemoBackend;
  throw new MemscopeError('bad-backend', `--backend: unknown backend ${JSON.stringify(value)}; expected one of ${DEMO_BACKENDS.join(', ')}`);
}

let wasmPathsSet = false;

export async function useDemoBackend(name: DemoBackend): Promise<void> {
  if (name === 'wasm' && !wasmPathsSet) {
    const require = createRequire(import.meta.url);
    const wasmFile = require.resolve('@tensorflow/tfjs-backend-wasm/dist/tfjs-backend-wasm.wasm');
    setWasmPaths(path.dirname(wasmFile) + path.sep);
    wasmPathsSet = true;
  }
  // memscope's own demos print tables; TFJS's "install tfjs-node" banner (a
  // console.warn on the cpu backend's first write) would land in the middle of
  // them. PROD silences TFJS warnings; the demos need none of its debug checks.
  tf.env().set('PROD', true);
  const ok = await tf.setBackend(name);
  if (!ok || tf.getBackend() !== name) {
    throw new MemscopeError('backend-unavailable', `TFJS backend '${name}' failed to initialise in this process`);
  }
}
