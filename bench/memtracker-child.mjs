// One training run for bench/memtracker.bench.mjs: the demo model on wasm, either untracked
// ('plain'), under MemTracker from start to end ('tracked'), or with the TFJS adapter attached to
// a sink that ignores everything ('adapter': the adapter's own cost). Tracking starts before the
// first step and never stops, as in a real training run. 'subscribed' attaches the adapter to a
// sink that implements MemTracker's event methods as no-ops: the adapter's cost of building and
// delivering the events MemTracker listens to, without MemTracker's own handling.
//
// Prints one JSON line: CPU and wall ms per step, each the median over `batches` batches of
// `steps` steps taken after `warmup` untimed steps (V8 keeps optimising TFJS's functions for the
// first ~3,600 steps of the demo model; see WARMUP_STEPS in memtracker.bench.mjs). The median of
// batches, rather than the mean of all steps, keeps a burst of activity from other processes in
// one batch from moving the figure.
//
// usage: node bench/memtracker-child.mjs MODE BATCH_SIZE WARMUP BATCHES STEPS
import { useDemoBackend } from '../dist/tfjs/demo-backend-node.js';
import { createDemoRun, DEMO_SHAPE } from '../dist/tfjs/demo-model.js';
import { MemTracker } from '../dist/tfjs/mem-tracker.js';
import { tfjsAdapter } from '../dist/tfjs/adapter.js';
import { MemRecorder } from '../dist/tracking/mem-recorder.js';

const [mode, batchSize, warmup, batches, steps] = [process.argv[2], ...process.argv.slice(3, 7).map(Number)];
if (!['plain', 'tracked', 'adapter', 'subscribed'].includes(mode) || ![batchSize, warmup, batches, steps].every((n) => Number.isInteger(n) && n > 0)) {
  console.error('usage: node bench/memtracker-child.mjs plain|tracked|adapter|subscribed BATCH_SIZE WARMUP BATCHES STEPS');
  process.exit(2);
}

await useDemoBackend('wasm');
const run = createDemoRun({ ...DEMO_SHAPE, batchSize });
const tracker = new MemTracker();
let session = null;
if (mode === 'tracked') {
  tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
  tracker.start();
} else if (mode === 'adapter' || mode === 'subscribed') {
  // A StorageBatchSink, as MemTracker's recorder is: 'adapter' ignores its storage events and takes
  // no other; 'subscribed' does nothing on exactly the events MemTracker listens to.
  const sink = { onStorageAlloc() {}, onStorageFree() {}, onStorageBatch() {} };
  if (mode === 'subscribed') {
    for (const name of Object.getOwnPropertyNames(MemRecorder.prototype)) if (name.startsWith('on')) sink[name] = () => {};
  }
  session = tfjsAdapter.attach(sink);
  session.module(run.model);
  session.optimizer(run.optimizer);
}

// Module statistics grow by a snapshot per module state per step (PyTorch's MemTracker keeps them
// too); a long run would reset them now and then, and so does this one, every RESET_STEPS steps,
// warm-up included: kept through a 4,000-step warm-up, they made the timed steps copy megabytes of
// growing snapshot logs and mark them in major GCs that a run resetting them never pays.
const RESET_STEPS = 400;
let stepsSinceReset = 0;
/** After `n` more steps: resets module statistics once RESET_STEPS steps have passed since the last reset (outside any timing). */
function countSteps(n) {
  stepsSinceReset += n;
  if (mode === 'tracked' && stepsSinceReset >= RESET_STEPS) {
    tracker.resetModStats();
    stepsSinceReset = 0;
  }
}
for (let done = 0; done < warmup; done += RESET_STEPS) {
  const n = Math.min(RESET_STEPS, warmup - done);
  run.train(n);
  countSteps(n);
}
const cpu = [];
const wall = [];
for (let b = 0; b < batches; b++) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  run.train(steps);
  const t1 = performance.now();
  const c = process.cpuUsage(c0);
  cpu.push((c.user + c.system) / 1000 / steps);
  wall.push((t1 - t0) / steps);
  countSteps(steps);
}
if (mode === 'tracked') tracker.stop();
session?.detach();
run.dispose();

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
console.log(JSON.stringify({ mode, batchSize, cpuMsPerStep: median(cpu), wallMsPerStep: median(wall) }));
