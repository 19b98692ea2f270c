// Heap that MemTracker keeps per training step: the demo model on wasm, batch 1, tracked from the
// start and never reset (module statistics keep every call's snapshots, as PyTorch's MemTracker
// does). Prints the growth of `heapUsed` between two forced GCs, per step and per module.
//
// usage: node --expose-gc bench/memtracker-heap-child.mjs [STEPS=3000]
import { useDemoBackend } from '../dist/tfjs/demo-backend-node.js';
import { createDemoRun, DEMO_SHAPE } from '../dist/tfjs/demo-model.js';
import { MemTracker } from '../dist/tfjs/mem-tracker.js';

if (typeof globalThis.gc !== 'function') {
  console.error('run with node --expose-gc');
  process.exit(2);
}
const steps = Number(process.argv[2] ?? 3000);
await useDemoBackend('wasm');
const run = createDemoRun({ ...DEMO_SHAPE, batchSize: 1 });
const tracker = new MemTracker();
tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
tracker.start();
run.train(50); // every module has been called and every weight and optimizer state exists
globalThis.gc();
const before = process.memoryUsage().heapUsed;
run.train(steps);
globalThis.gc();
const grown = process.memoryUsage().heapUsed - before;
const modules = tracker.moduleStats().length;
tracker.stop();
run.dispose();
console.log(JSON.stringify({ steps, modules, bytesPerStep: Math.round(grown / steps), bytesPerModuleStep: Math.round(grown / steps / modules) }));
