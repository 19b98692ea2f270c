import * as tf from '@tensorflow/tfjs-core';

/**
 * An independent figure of what the TFJS engine holds, from the engine's own
 * bookkeeping rather than from memscope's hooks.
 *
 * The engine records one entry per live dataId in `state.tensorInfo`
 * ({backend, dtype, shape, bytes}); the entry is created by trackTensor for a
 * new dataId and deleted by removeDataId when the backend releases the data.
 * It is a WeakMap (not iterable), so the oracle swaps in a Map with the same
 * interface *before any tensor exists*: the engine keeps working unchanged and
 * the test can enumerate every live dataId. Summing the entries' bytes per
 * backend is the engine's live bytes deduplicated by dataId — unlike
 * `tf.memory().numBytes`, which adds a dataId's bytes once per tensor sharing
 * it. (complex64 entries carry 0 bytes in the engine; the programs here use no
 * complex tensors, a separate test covers them.)
 */
export interface EngineOracle {
  /** Live bytes per backend name. */
  bytesByDevice(): Map<string, number>;
  /** Number of live dataIds. */
  count(): number;
}

interface Entry {
  backend: object;
  bytes: number;
  dtype: string;
}

export function installEngineOracle(): EngineOracle {
  const engine = tf.engine() as unknown as {
    state: { tensorInfo: unknown; numDataBuffers: number };
    registry: Record<string, object>;
  };
  if (engine.state.numDataBuffers !== 0) {
    throw new Error(`the oracle must be installed before any tensor exists (engine holds ${engine.state.numDataBuffers} dataIds)`);
  }
  const map = new Map<object, Entry>();
  engine.state.tensorInfo = map;
  const nameOf = (backend: object): string => {
    for (const [name, b] of Object.entries(engine.registry)) if (b === backend) return name;
    return 'unknown';
  };
  return {
    bytesByDevice() {
      if (engine.state.tensorInfo !== map) throw new Error('engine state was replaced (tf.engine().reset()?)');
      const out = new Map<string, number>();
      for (const e of map.values()) {
        const d = nameOf(e.backend);
        out.set(d, (out.get(d) ?? 0) + e.bytes);
      }
      return out;
    },
    count() {
      return map.size;
    },
  };
}
