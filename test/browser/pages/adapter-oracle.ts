// The page program both TFJS-adapter browser tests run (webgl, webgpu): the adapter attached to a
// sink that checks the storage invariant at every kernel boundary against the engine's own dataId
// map (made enumerable before any tensor exists, as in test/tfjs/support/engine-oracle.ts), and a
// training step of a small MLP under it. Each test adds its backend's own checks between
// `trainStep()` and `finish()`. Bundled into the page by esbuild.
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import { tfjsAdapter } from '../../../src/tfjs/index.js';

const PATCHED = ['trackTensor', 'disposeTensor', 'removeDataId', 'runKernelFunc', 'gradients', 'startScope', 'endScope'];

interface EngineInfo {
  bytes: number;
}

/** Attaches the checking sink; `selectBackend` runs after the oracle is in place, before any tensor. */
export async function attachWithOracle(selectBackend: () => Promise<void>) {
  const engine = tf.engine() as unknown as { state: { tensorInfo: unknown }; backend: any };
  const infos = new Map<object, EngineInfo>();
  engine.state.tensorInfo = infos;
  await selectBackend();
  const proto = Object.getPrototypeOf(engine) as Record<string, unknown>;
  const originals = PATCHED.map((m) => proto[m]);
  const engineBytes = () => {
    let n = 0;
    for (const e of infos.values()) n += e.bytes;
    return n;
  };

  let memscopeBytes = 0;
  let memscopeCount = 0;
  let checks = 0;
  const mismatches: string[] = [];
  const log: string[] = [];
  const devices = new Set<string>();
  const frees: number[] = [];
  const check = (where: string) => {
    checks++;
    if (memscopeBytes !== engineBytes() || memscopeCount !== infos.size) {
      mismatches.push(`${where}: ${memscopeBytes} B / ${memscopeCount} vs engine ${engineBytes()} B / ${infos.size}`);
    }
  };
  const session = tfjsAdapter.attach({
    onStorageAlloc: (st) => {
      memscopeBytes += st.bytes;
      memscopeCount++;
      devices.add(st.device);
    },
    onStorageFree: (st) => {
      memscopeBytes -= st.bytes;
      memscopeCount--;
      frees.push(st.id);
    },
    onKernelStart: (k) => check(`start ${k.name}`),
    onKernelEnd: (k) => check(`end ${k.name}`),
    onBackwardModuleEnter: (m) => log.push(`bw-enter ${m.path}`),
    onBackwardModuleExit: (m) => log.push(`bw-exit ${m.path}`),
  });
  for (const st of session.liveStorages()) {
    memscopeBytes += st.bytes;
    memscopeCount++;
  }

  return {
    engine,
    infos,
    session,
    frees,
    check,
    /** One trainOnBatch of Dense(4→8) → Dense(8→8) → Dense(8→2) with Adam; returns the loss and the batch. */
    async trainStep() {
      const model = tfl.sequential({
        name: 'mlp',
        layers: [
          tfl.layers.dense({ units: 8, inputShape: [4], activation: 'relu', name: 'l1' }),
          tfl.layers.dense({ units: 8, activation: 'relu', name: 'l2' }),
          tfl.layers.dense({ units: 2, name: 'l3' }),
        ],
      });
      model.compile({ optimizer: tf.train.adam(0.01), loss: 'meanSquaredError' });
      session.module(model);
      session.optimizer(model.optimizer);
      const xs = tf.randomNormal([5, 4]);
      const ys = tf.randomNormal([5, 2]);
      const loss = (await model.trainOnBatch(xs, ys)) as number;
      return { loss, xs, ys };
    },
    /** Detaches, and returns what every adapter test asserts. */
    finish() {
      session.detach();
      return {
        backend: tf.getBackend(),
        checks,
        mismatches,
        devices: [...devices],
        log,
        finalMemscope: memscopeBytes,
        finalEngine: engineBytes(),
        finalCount: memscopeCount,
        engineCount: infos.size,
        restored: PATCHED.every((m, i) => proto[m] === originals[i]),
      };
    },
  };
}
