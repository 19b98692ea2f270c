// MemoryTracker's (operator-level traces) cost on training: CPU time per
// training step of the demo model (Dense → BatchNorm → Dense, Adam) on the
// wasm backend at batch 1, where per-kernel overhead shows most: untracked;
// the adapter delivering the same events MemoryTracker subscribes to (kernel,
// storage, module enter/exit, model and optimizer instrumented) to empty
// handlers; and under MemoryTracker. The second separates the adapter's cost
// of producing events from MemoryTracker's own.
//
// Modes alternate in one process and rotate order every round, so drift (JIT
// warm-up, heap growth, other processes) hits all alike. Each figure is the
// median over rounds of the mean per-step CPU time (process.cpuUsage) within a round.
//
//   npm run bench -- op-tracker
//   MEMSCOPE_BENCH_ROUNDS=41 npm run bench -- op-tracker
import { useDemoBackend } from '../dist/tfjs/demo-backend-node.js';
import { createDemoRun, DEMO_SHAPE } from '../dist/tfjs/demo-model.js';
import { MemoryTracker } from '../dist/tfjs/memory-tracker.js';
import { tfjsAdapter } from '../dist/tfjs/adapter.js';

const ROUNDS = Number(process.env.MEMSCOPE_BENCH_ROUNDS ?? 21);
const STEPS = 40;
const MODES = ['plain', 'adapter', 'tracked'];
const noop = () => {};
const EMPTY_SINK = { onKernelStart: noop, onKernelEnd: noop, onStorageAlloc: noop, onStorageFree: noop, onModuleEnter: noop, onModuleExit: noop };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function timeSteps(run, mode, tracker) {
  let session = null;
  if (mode === 'tracked') tracker.startMonitor(run.model, { optimizer: run.optimizer });
  if (mode === 'adapter') {
    session = tfjsAdapter.attach(EMPTY_SINK);
    session.module(run.model);
    session.optimizer(run.optimizer);
  }
  const t0 = process.cpuUsage();
  run.train(STEPS);
  const dt = process.cpuUsage(t0);
  if (mode === 'tracked') tracker.stop();
  session?.detach();
  return (dt.user + dt.system) / 1000 / STEPS;
}

await useDemoBackend('wasm');
const run = createDemoRun({ ...DEMO_SHAPE, batchSize: 1 });
const tracker = new MemoryTracker();
run.train(100); // warm-up
for (const m of MODES) timeSteps(run, m, tracker);
const results = Object.fromEntries(MODES.map((m) => [m, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (let k = 0; k < MODES.length; k++) {
    const mode = MODES[(r + k) % MODES.length];
    results[mode].push(timeSteps(run, mode, tracker));
  }
}
const plain = median(results.plain);
const adapter = median(results.adapter);
const tracked = median(results.tracked);
console.log(`wasm, batch 1, ${STEPS} steps x ${ROUNDS} rounds; ${tracker.records.length} records per ${STEPS} tracked steps`);
console.log(`untracked        ${plain.toFixed(3)} ms CPU/step`);
console.log(`adapter events   ${adapter.toFixed(3)} ms CPU/step  (x${(adapter / plain).toFixed(2)}; same events, empty handlers)`);
console.log(`MemoryTracker    ${tracked.toFixed(3)} ms CPU/step  (x${(tracked / plain).toFixed(2)}; x${(tracked / adapter).toFixed(2)} over the adapter alone)`);
run.dispose();
