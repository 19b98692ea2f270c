// memscope/webgpu's recording cost in headless Chromium (SwiftShader's WebGPU, as the browser
// tests use): a loop that creates and destroys buffers (and every tenth step a mipmapped texture)
// is timed unrecorded and recorded in the same page, rounds interleaved so that machine load
// falls on every variant alike. Variants: recorded with creating stacks (the default), recorded
// without stacks, and with stacks plus recordMemoryHistory (the trace ring). Then one TFJS webgpu
// training step (trainOnBatch of a Dense/BatchNorm/Dense MLP with Adam, batch 64) timed the same
// way, unrecorded and recorded with stacks on the backend's own device. Three runs, each in a
// fresh browser; each prints medians over its rounds and the ratio with its 95% bootstrap
// interval; the figure is the median of the three runs' ratios.
import { ratioInterval } from './ratio-interval.mjs';
import { bundleBenchPage, openWebgpuPage } from './webgpu-page.mjs';

const RUNS = 3;
const ROUNDS = 9;
const STEPS = 2000;
const TRAIN_ROUNDS = 7;
const TRAIN_STEPS = 5;

const PAGE = `
import { installWebGPU } from './dist/webgpu/index.js';
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import '@tensorflow/tfjs-backend-webgpu';

function loop(device, steps) {
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  const t0 = performance.now();
  for (let i = 0; i < steps; i++) {
    device.createBuffer({ size: 256 * (1 + (i % 64)), usage }).destroy();
    if (i % 10 === 0) device.createTexture({ size: [64, 64], format: 'rgba8unorm', usage: GPUTextureUsage.TEXTURE_BINDING, mipLevelCount: 7 }).destroy();
  }
  return performance.now() - t0;
}

globalThis.measure = async (rounds, steps) => {
  const adapter = await navigator.gpu.requestAdapter();
  const device = await adapter.requestDevice();
  const variants = {
    unrecorded: () => loop(device, steps),
    recorded: () => run({}, steps),
    'recorded, no stacks': () => run({ stacks: false }, steps),
    'recorded + history': () => run({}, steps, true),
  };
  function run(options, n, history = false) {
    const memory = installWebGPU(options);
    memory.track(device);
    if (history) memory.recordMemoryHistory({ maxEntries: 100000 });
    try {
      return loop(device, n);
    } finally {
      memory.uninstall();
    }
  }
  for (const f of Object.values(variants)) f(); // warm-up
  const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [k, f] of Object.entries(variants)) times[k].push(f());
  await device.queue.onSubmittedWorkDone();
  device.destroy();
  return times;
};
`;

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const TRAIN = `
globalThis.measureTraining = async (rounds, steps) => {
  if (!(await tf.setBackend('webgpu'))) throw new Error('the webgpu backend did not start');
  const device = tf.backend().device;
  const model = tfl.sequential();
  model.add(tfl.layers.dense({ units: 256, inputShape: [128], activation: 'relu' }));
  model.add(tfl.layers.batchNormalization());
  model.add(tfl.layers.dense({ units: 10 }));
  model.compile({ optimizer: tf.train.adam(0.001), loss: 'meanSquaredError' });
  const xs = tf.randomNormal([64, 128]);
  const ys = tf.randomNormal([64, 10]);
  async function train(n) {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await model.trainOnBatch(xs, ys);
    return (performance.now() - t0) / n;
  }
  async function recorded(n) {
    const memory = installWebGPU();
    memory.track(device);
    try {
      return await train(n);
    } finally {
      memory.uninstall();
    }
  }
  await train(3); // warm-up: kernels compiled, the buffer pool filled
  await recorded(3);
  const times = { unrecorded: [], recorded: [] };
  for (let r = 0; r < rounds; r++) {
    times.unrecorded.push(await train(steps));
    times.recorded.push(await recorded(steps));
  }
  return times;
};
`;

const script = await bundleBenchPage(PAGE + TRAIN, 'webgpu-bench-page.js');

console.log(`create/destroy loop: ${STEPS} buffers (256 B–16 KiB) + ${STEPS / 10} textures (64×64 rgba8unorm, 7 mips) per round, ${ROUNDS} rounds, ${RUNS} runs`);
const ratios = {};
for (let run = 1; run <= RUNS; run++) {
  const { browser, page } = await openWebgpuPage(script);
  try {
    const times = await page.evaluate(([r, s]) => globalThis.measure(r, s), [ROUNDS, STEPS]);
    const base = median(times.unrecorded);
    const parts = [`run ${run}: unrecorded ${base.toFixed(1)} ms`];
    for (const [k, xs] of Object.entries(times)) {
      if (k === 'unrecorded') continue;
      const ratio = median(xs) / base;
      const ci = ratioInterval(xs, times.unrecorded, median);
      (ratios[k] ??= []).push(ratio);
      parts.push(`${k} ${median(xs).toFixed(1)} ms (×${ratio.toFixed(2)}, 95% ${ci.low.toFixed(2)}–${ci.high.toFixed(2)})`);
    }
    console.log(parts.join('; '));
    const train = await page.evaluate(([r, s]) => globalThis.measureTraining(r, s), [TRAIN_ROUNDS, TRAIN_STEPS]);
    const trainBase = median(train.unrecorded);
    const trainRatio = median(train.recorded) / trainBase;
    const trainCi = ratioInterval(train.recorded, train.unrecorded, median);
    (ratios['TFJS webgpu training step, recorded'] ??= []).push(trainRatio);
    console.log(
      `run ${run}: TFJS webgpu trainOnBatch unrecorded ${trainBase.toFixed(1)} ms/step; recorded ${median(train.recorded).toFixed(1)} ms/step (×${trainRatio.toFixed(2)}, 95% ${trainCi.low.toFixed(2)}–${trainCi.high.toFixed(2)})`,
    );
  } finally {
    await browser.close();
  }
}
for (const [k, rs] of Object.entries(ratios)) {
  console.log(`${k} / unrecorded: median of ${RUNS} runs ×${median(rs).toFixed(2)} (runs: ${rs.map((r) => r.toFixed(2)).join(', ')})`);
}
