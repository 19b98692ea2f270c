// Run by scripts/test-package.mjs inside a fresh app that installed memscope's tarball and
// @tensorflow/tfjs from the registry: memscope's API as a user's ES module reaches it, through
// the package's exports. Prints one "ok" line per check; exits 1 at the first that fails.
// Usage: node api-check.mjs <small_3seg.pickle>
import { readFileSync } from 'node:fs';
import * as tf from '@tensorflow/tfjs';
import { MEM_REF_TYPES } from 'memscope';
import { DeviceMemory } from 'memscope/allocator';
import { MemTracker } from 'memscope/tfjs';
import { readSnapshot } from 'memscope/torch';

function check(ok, what) {
  if (!ok) {
    process.stderr.write(`api-check: FAILED ${what}\n`);
    process.exit(1);
  }
  process.stdout.write(`ok ${what}\n`);
}

await tf.setBackend('cpu');
// Dense(4→2): a 4×2 kernel and a bias of 2, float32: 40 B of weights.
const model = tf.sequential({ layers: [tf.layers.dense({ inputShape: [4], units: 2 })] });
model.compile({ optimizer: tf.train.sgd(0.1), loss: 'meanSquaredError' });
const xs = tf.ones([8, 4]);
const ys = tf.zeros([8, 2]);

const tracker = new MemTracker();
tracker.trackExternal(model, xs, ys);
await tracker.track(() => model.fit(xs, ys, { epochs: 2, batchSize: 8, verbose: 0 }));
const current = tracker.snapshot('current').cpu;
check(current?.Parameter === 40, `MemTracker counts the Dense(4→2) weights as 40 B of Parameter (got ${current?.Parameter})`);
check(current?.Activation === 0, `MemTracker: nothing of fit's activations is alive after it (got ${current?.Activation})`);
const peak = tracker.snapshot('peak').cpu;
check(peak !== undefined && peak.Total > current.Total, `MemTracker's peak (${peak?.Total} B) lies above what is alive after fit (${current.Total} B)`);
const table = tracker.formatSnapshot('peak', { units: 'B', tabulate: true });
check(MEM_REF_TYPES.every((type) => table.includes(type)), "formatSnapshot's table names every category");

const snapshot = readSnapshot(new Uint8Array(readFileSync(process.argv[2])));
check(snapshot.segments.length === 3 && snapshot.blocks.count === 76, `readSnapshot (memscope/torch) reads 3 segments and 76 blocks (got ${snapshot.segments.length}, ${snapshot.blocks.count})`);

const device = new DeviceMemory();
device.cachingAllocatorAlloc(1000);
check(device.memoryAllocated() === 1024, `DeviceMemory (memscope/allocator) rounds 1000 B up to 1024 (got ${device.memoryAllocated()})`);
