// The cost of memscope/browser's TFJS webgpu attribution on a training step, in headless
// Chromium (SwiftShader's WebGPU, as the browser tests use): one `trainOnBatch` of a small dense
// model is timed unrecorded and recorded (memscope/webgpu's recording with creating stacks, plus
// attachTfjsWebGPU's pool bookkeeping) in the same page, rounds interleaved so that machine load
// falls on both alike. Three runs, each in a fresh browser; each prints medians over its rounds
// and the ratio with its 95% bootstrap interval; the figure is the median of the three runs' ratios.
import { ratioInterval } from './ratio-interval.mjs';
import { bundleBenchPage, openWebgpuPage } from './webgpu-page.mjs';

const RUNS = 3;
const ROUNDS = 9;
const STEPS = 10;

const PAGE = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-webgpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { installWebGPU } from './dist/webgpu/index.js';
import { attachTfjsWebGPU } from './dist/browser/index.js';

globalThis.measure = async (rounds, steps) => {
  if (!(await tf.setBackend('webgpu'))) throw new Error('webgpu backend failed to initialise');
  const model = tfl.sequential({ layers: [tfl.layers.dense({ units: 256, inputShape: [128], activation: 'relu' }), tfl.layers.dense({ units: 10 })] });
  model.compile({ optimizer: 'adam', loss: 'meanSquaredError' });
  const xs = tf.randomNormal([64, 128]);
  const ys = tf.randomNormal([64, 10]);
  const train = async (n) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await model.trainOnBatch(xs, ys);
    return (performance.now() - t0) / n;
  };
  const recorded = async (n) => {
    const memory = installWebGPU();
    const tfjs = attachTfjsWebGPU({ tf, memory });
    try {
      return await train(n);
    } finally {
      tfjs.detach();
      memory.uninstall();
    }
  };
  const variants = { unrecorded: train, recorded };
  for (const f of Object.values(variants)) await f(2); // warm-up: pipelines compiled, pool filled
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [k, f] of Object.entries(variants)) times[k].push(await f(steps));
  return times;
};
`;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const script = await bundleBenchPage(PAGE, 'browser-bench-page.js');

console.log(`TFJS webgpu trainOnBatch (dense 128→256→10, batch 64, adam): ms a step over ${STEPS} steps a round, ${ROUNDS} rounds, ${RUNS} runs`);
const ratios = [];
for (let run = 1; run <= RUNS; run++) {
  const { browser, page } = await openWebgpuPage(script);
  try {
    const times = await page.evaluate(([r, s]) => globalThis.measure(r, s), [ROUNDS, STEPS]);
    const base = median(times.unrecorded);
    const ratio = median(times.recorded) / base;
    const ci = ratioInterval(times.recorded, times.unrecorded, median);
    ratios.push(ratio);
    console.log(`run ${run}: unrecorded ${base.toFixed(2)} ms a step; recorded ${median(times.recorded).toFixed(2)} ms (×${ratio.toFixed(3)}, 95% ${ci.low.toFixed(3)}–${ci.high.toFixed(3)})`);
  } finally {
    await browser.close();
  }
}
console.log(`recorded / unrecorded: median of ${RUNS} runs ×${median(ratios).toFixed(3)} (runs: ${ratios.map((r) => r.toFixed(3)).join(', ')})`);
