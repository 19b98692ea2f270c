import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
// tfjs-layers' node bundle registers every op gradient in the global registry (tfjs-core's node entry does not).
import '@tensorflow/tfjs-layers';
import { setWasmPaths } from '@tensorflow/tfjs-backend-wasm';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);
let wasmPathsSet = false;

/** Switches TFJS to `name` ('cpu' | 'wasm'); wasm loads its .wasm files from the installed package. */
export async function useBackend(name: 'cpu' | 'wasm'): Promise<void> {
  if (name === 'wasm' && !wasmPathsSet) {
    // The package's main entry lives in dist/, next to the .wasm binaries.
    const dist = dirname(require.resolve('@tensorflow/tfjs-backend-wasm'));
    setWasmPaths(join(dist, '/'));
    wasmPathsSet = true;
  }
  const ok = await tf.setBackend(name);
  if (!ok || tf.getBackend() !== name) throw new Error(`could not switch TFJS to the ${name} backend`);
}
