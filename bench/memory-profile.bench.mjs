// The memory profiler's cost: (1) recording — CPU ms per training step of the
// demo model (Dense → BatchNorm → Dense, Adam, cpu backend) plain vs under
// `profile()` with all three flags; (2) analysis — building the MemoryProfile
// (data-flow graph, categories) and its timeline for N recorded steps, to show
// how it scales. Recording keeps every event in memory, like torch.profiler:
// profile a few steps, not a whole training run.
//
// Plain and profiled rounds alternate (order swapped every round) so drift
// hits both alike; figures are medians over rounds of per-step CPU time.
//
//   npm run bench -- memory-profile
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { useDemoBackend } from '../dist/tfjs/demo-backend-node.js';
import { createDemoRun, DEMO_SHAPE } from '../dist/tfjs/demo-model.js';
import { profile } from '../dist/tfjs/profile.js';
import { MemoryProfileTimeline } from '../dist/analysis/timeline-node.js';

const ROUNDS = Number(process.env.MEMSCOPE_BENCH_ROUNDS ?? 11);
const STEPS = 10;
const ALL = { recordShapes: true, profileMemory: true, withStack: true };

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

function cpuMs(fn) {
  const c0 = process.cpuUsage();
  const out = fn();
  const c1 = process.cpuUsage(c0);
  return { ms: (c1.user + c1.system) / 1000, out };
}

await useDemoBackend('cpu');
const run = createDemoRun(DEMO_SHAPE);
run.train(30); // warm-up
const plain = [];
const profiled = [];
for (let r = 0; r < ROUNDS; r++) {
  globalThis.gc?.();
  const order = r % 2 === 0 ? ['plain', 'profiled'] : ['profiled', 'plain'];
  for (const mode of order) {
    if (mode === 'plain') plain.push(cpuMs(() => run.train(STEPS)).ms / STEPS);
    else profiled.push(cpuMs(() => profile({ ...ALL, models: [run.model], optimizers: [run.optimizer] }, () => run.train(STEPS))).ms / STEPS);
  }
}
console.log(
  `recording, demo model Dense(${DEMO_SHAPE.inputs}→${DEMO_SHAPE.hidden}) → BatchNorm → Dense(→${DEMO_SHAPE.outputs}) + Adam, batch ${DEMO_SHAPE.batchSize}, cpu backend, ${ROUNDS} rounds × ${STEPS} steps: ` +
    `CPU ms/step plain ${median(plain).toFixed(3)}, profiled ${median(profiled).toFixed(3)} → ratio ${(median(profiled) / median(plain)).toFixed(2)}`,
);

for (const steps of [1, 10, 100]) {
  const result = profile({ ...ALL, models: [run.model], optimizers: [run.optimizer] }, () => run.train(steps));
  const { ms: analyseMs, out: memoryProfile } = cpuMs(() => result.memoryProfile());
  const { ms: timelineMs, out: entries } = cpuMs(() => memoryProfile.timeline.length);
  const series = new MemoryProfileTimeline(memoryProfile).coalesce('cpu');
  console.log(
    `analysis of ${String(steps).padStart(3)} step(s): ${memoryProfile.dataFlowGraph.flowNodes.length} data-flow nodes, ${entries} timeline entries, ` +
      `${series.times.length} chart points; MemoryProfile ${analyseMs.toFixed(1)} ms, timeline ${timelineMs.toFixed(1)} ms`,
  );
  if (steps === 10) {
    const out = join(dirname(fileURLToPath(import.meta.url)), 'out');
    mkdirSync(out, { recursive: true });
    new MemoryProfileTimeline(memoryProfile).exportMemoryTimelineHtml(join(out, 'memory-timeline.html'), 'cpu', {
      title: `demo model, ${steps} Adam steps (cpu backend)`,
    });
    console.log(`wrote ${join(out, 'memory-timeline.html')}`);
  }
}
run.dispose();
