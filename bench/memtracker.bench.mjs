// MemTracker's cost on training: time per training step of the demo model
// (Dense → BatchNorm → Dense, Adam) on the wasm backend, tracked vs untracked,
// at batch 1 (where per-tensor overhead shows most) and batch 64. Target: ratio ≤ 1.10 at batch 1.
//
// 1. Training runs (the target's figure). Each run is a fresh process
//    (bench/memtracker-child.mjs) that trains untracked, or under MemTracker from its first step
//    to its last, as a user's tracked training run would; two more kinds attach only the TFJS
//    adapter, to a sink that ignores everything (the adapter's own cost) and to a sink whose
//    MemTracker event methods do nothing (the adapter building and delivering MemTracker's
//    events). Runs of the four kinds
//    alternate, in a rotating order, for MEMSCOPE_BENCH_ROUNDS rounds, so drift and other
//    processes hit all alike. A run's figure is its median per-step CPU time (user + system, all
//    threads) over batches of steps after a warm-up; the ratio is tracked / untracked of the
//    medians over runs. The median of the per-round ratios and the wall-clock ratio are printed
//    beside it.
// 2. MemTracker's own event handling, measured exactly by replaying one recorded step's events.
// 3. Switching tracking on and off inside one process (start()/stop() every round): each switch
//    re-patches the engine's prototype and V8 re-optimises TFJS for ~200 steps, so rounds settle that long first. This is what a program that tracks
//    some steps and not others pays between switches.
//
//   npm run bench -- memtracker
//   MEMSCOPE_BENCH_ROUNDS=15 npm run bench -- memtracker   (more runs, steadier; 0 skips part 1)
//   MEMSCOPE_BENCH_SWITCH_ROUNDS=0 npm run bench -- memtracker   (skip part 3)
//   MEMSCOPE_BENCH_BATCH_SIZES=1 MEMSCOPE_BENCH_RUN_MODES=plain,tracked ...   (part 1 for batch 1, untracked
//     against MemTracker only: twice the rounds in the same time, for a narrower interval)
//   MEMSCOPE_BENCH_CALLGRIND=1 npm run bench -- memtracker   (add part 4: exact instruction counts)
//   MEMSCOPE_BENCH_CALLGRIND=functions npm run bench -- memtracker   (part 4, and where the extra instructions are, by function)
//   MEMSCOPE_BENCH_CALLGRIND_WARMUP=600 ...   (part 4 after fewer warm-up steps than WARMUP_STEPS: quicker, with V8's compile work in it)
//   MEMSCOPE_BENCH_CALLGRIND_MODES=plain,tracked ...   (part 4 for these modes only)
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { useDemoBackend } from '../dist/tfjs/demo-backend-node.js';
import { createDemoRun, DEMO_SHAPE } from '../dist/tfjs/demo-model.js';
import { MemTracker } from '../dist/tfjs/mem-tracker.js';
import { tfjsAdapter } from '../dist/tfjs/adapter.js';
import { MemRecorder } from '../dist/tracking/mem-recorder.js';
import { ratioInterval, verdict } from './ratio-interval.mjs';
import { perfMapOf, perStepDifference, selfInstructions } from './callgrind-functions.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const ROUNDS = Number(process.env.MEMSCOPE_BENCH_ROUNDS ?? 9);
const SWITCH_ROUNDS = Number(process.env.MEMSCOPE_BENCH_SWITCH_ROUNDS ?? 9);
const TARGET = 1.1;
/**
 * Training runs: warm-up steps, then `batches` timed batches of `steps` steps. V8 keeps optimising
 * TFJS functions for the first ~3,600 steps of the demo model, at either batch size: functions
 * that run once per step reach TurboFan's thresholds one by one (`node --trace-opt`, untracked:
 * ~160 compilations in the first 400 steps, then ~30 per 400 steps until step 2,400, ~4 until
 * 3,600, and 0–1 after). Those compilations run on V8's background threads, whose CPU time part 1
 * counts: between steps 600 and 2,200 they are 10–25 % of the untracked runs' CPU time, the same
 * in every mode, so timing those steps would dilute the ratio and add noise. The timed steps
 * begin after 4,000.
 */
const WARMUP_STEPS = 4000;
const ALL_RUNS = [
  { batchSize: 1, warmup: WARMUP_STEPS, batches: 40, steps: 40 },
  { batchSize: 64, warmup: WARMUP_STEPS, batches: 30, steps: 15 },
];
/** The values of a comma-separated environment variable, each one of `allowed` (all of them when it is unset). */
function envList(name, allowed) {
  const value = process.env[name];
  if (value === undefined) return allowed;
  const picked = value.split(',').map((v) => v.trim());
  const unknown = picked.filter((v) => !allowed.includes(v));
  if (unknown.length > 0) throw new Error(`${name}=${value}: expected a comma-separated list of ${allowed.join(', ')}`);
  return picked;
}
const BATCH_SIZES = envList('MEMSCOPE_BENCH_BATCH_SIZES', ALL_RUNS.map((r) => String(r.batchSize)));
const RUNS = ALL_RUNS.filter(({ batchSize }) => BATCH_SIZES.includes(String(batchSize)));
/** Kinds of part-1 runs (as memtracker-child.mjs names them), in rotation order, with their names in the output. */
const MODE_NAMES = { plain: 'untracked', tracked: 'MemTracker', adapter: 'adapter-only', subscribed: 'no-op-sink' };
const PICKED_RUN_MODES = envList('MEMSCOPE_BENCH_RUN_MODES', Object.keys(MODE_NAMES));
/** Untracked and MemTracker always run; the adapter alone and the no-op sink unless left out. */
const RUN_MODES = Object.keys(MODE_NAMES).filter((mode) => mode === 'plain' || mode === 'tracked' || PICKED_RUN_MODES.includes(mode));
// Part 3: attaching and detaching patch the TFJS engine's prototype, which makes V8 drop
// optimised TFJS code; every round runs `settleSteps` untimed steps after switching mode.
// Re-optimisation takes ~150–200 steps, counted in steps (calls into the patched code), not in
// time, so batch 64 settles as many steps as batch 1 (with fewer, its timed steps fell in the
// transient after the forced GC run.mjs makes, and read as 1.4–1.9× "tracking cost").
const SETTLE = Number(process.env.MEMSCOPE_BENCH_SETTLE ?? 200);
const CONFIGS = [
  { batchSize: 1, stepsPerRound: 40, settleSteps: SETTLE, warmupSteps: 200 },
  { batchSize: 64, stepsPerRound: 15, settleSteps: SETTLE, warmupSteps: 60 },
];

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const fmt = (x) => x.toFixed(3);
const spread = (xs) => `${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))}`;

/** A StorageBatchSink that ignores its storage events and takes no other: the adapter's own cost. */
const IGNORING_SINK = { onStorageAlloc() {}, onStorageFree() {}, onStorageBatch() {} };

/** A sink that does nothing on exactly the events MemTracker listens to: the adapter's cost of delivering them. */
function noopSinkLikeMemTracker() {
  const sink = {}; // with onStorageBatch: a StorageBatchSink, as MemTracker's recorder is
  for (const name of Object.getOwnPropertyNames(MemRecorder.prototype)) if (name.startsWith('on')) sink[name] = () => {};
  return sink;
}

/** One recorded event delivered to `sink` the way the adapter calls it: by name, with its own arity. */
function deliver(sink, e) {
  const [a, b] = e.args;
  switch (e.name) {
    case 'onStorageAlloc': return sink.onStorageAlloc(a, e.ctx);
    case 'onStorageFree': return sink.onStorageFree(a, e.ctx);
    case 'onStorageBatch': return sink.onStorageBatch(a, b, e.args[2], e.ctx);
    case 'onModuleEnter': return sink.onModuleEnter(a, b, e.ctx);
    case 'onModuleExit': return sink.onModuleExit(a, b, e.ctx);
    case 'onBackwardModuleEnter': return sink.onBackwardModuleEnter(a, e.ctx);
    case 'onBackwardModuleExit': return sink.onBackwardModuleExit(a, e.ctx);
    case 'onGradientStart': return sink.onGradientStart(a, e.ctx);
    case 'onGradientEnd': return sink.onGradientEnd(a, e.ctx);
    case 'onOptimizerStepStart': return sink.onOptimizerStepStart(a, e.ctx);
    case 'onOptimizerStepEnd': return sink.onOptimizerStepEnd(a, e.ctx);
    case 'onVariableAssign': return sink.onVariableAssign(a, b, e.ctx);
    default: throw new Error(`bench: MemRecorder event ${e.name} is not replayed; add it to deliver()`);
  }
}

/** Part 1: one fresh training process. */
function trainingRun(mode, { batchSize, warmup, batches, steps }) {
  const args = [join(here, 'memtracker-child.mjs'), mode, batchSize, warmup, batches, steps].map(String);
  const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`memtracker-child ${mode} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function trainingRuns(config) {
  const modes = RUN_MODES;
  const cpu = Object.fromEntries(Object.keys(MODE_NAMES).map((mode) => [mode, []]));
  const wall = Object.fromEntries(Object.keys(MODE_NAMES).map((mode) => [mode, []]));
  const paired = [];
  for (let r = 0; r < ROUNDS; r++) {
    const got = {};
    for (let k = 0; k < modes.length; k++) {
      const mode = modes[(r + k) % modes.length];
      got[mode] = trainingRun(mode, config);
      cpu[mode].push(got[mode].cpuMsPerStep);
      wall[mode].push(got[mode].wallMsPerStep);
    }
    paired.push(got.tracked.cpuMsPerStep / got.plain.cpuMsPerStep);
  }
  return { cpu, wall, paired };
}

/** Mean CPU and wall ms per step over `steps` steps (after `settle` untimed ones), under `mode`: 'plain', 'adapter' or 'tracked'. */
function timeSteps(run, settle, steps, mode, tracker) {
  let session = null;
  if (mode === 'tracked') tracker.start();
  if (mode === 'adapter' || mode === 'subscribed') {
    session = tfjsAdapter.attach(mode === 'adapter' ? IGNORING_SINK : noopSinkLikeMemTracker());
    session.module(run.model);
    session.optimizer(run.optimizer);
  }
  run.train(settle);
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  run.train(steps);
  const t1 = performance.now();
  const c1 = process.cpuUsage(c0);
  if (mode === 'tracked') {
    tracker.stop();
    // Module statistics grow by one call per step; a long training would reset them too.
    tracker.resetModStats();
  }
  session?.detach();
  return { cpu: (c1.user + c1.system) / 1000 / steps, wall: (t1 - t0) / steps };
}

/**
 * The sink's cost alone, free of the machine's noise: one training step's
 * events are recorded, then fed to a MemRecorder over and over in a tight loop
 * (storages the step allocates get fresh identities each time, so every replay
 * does the work of a real step), each method called by name with its own arity, as the adapter
 * calls it (a computed `sink[name](...args)` is a megamorphic call that costs more than the
 * handler). Returns the best-of-15 ms per replayed step.
 */
function replayedSinkMs(run) {
  const events = [];
  const snapTensor = (t) => ({ id: t.id, storage: t.storage, variableName: t.variableName, trainable: t.trainable, dtype: t.dtype, shape: t.shape });
  const recorder = {};
  for (const name of Object.getOwnPropertyNames(MemRecorder.prototype)) {
    if (!name.startsWith('on')) continue;
    recorder[name] = (...args) => {
      const ctx = args.pop();
      const copy = args.map((a) =>
        a instanceof Float64Array
          ? a.slice(0, args[1]) // the adapter reuses its batch array
          : Array.isArray(a)
          ? a.map((x) => (x && 'x' in x ? { x: snapTensor(x.x), grad: x.grad ? snapTensor(x.grad) : null } : snapTensor(x)))
          : a !== null && typeof a === 'object' && 'storage' in a
            ? snapTensor(a)
            : a,
      );
      events.push({ name, args: copy, phase: ctx.phase });
    };
  }
  const session = tfjsAdapter.attach(recorder);
  session.module(run.model);
  session.optimizer(run.optimizer);
  run.train(1);
  session.detach();

  // Storages the step allocates, by id: under MemTracker the adapter sends storage events in
  // batches (onStorageBatch) and builds storage objects only when a TensorRef is asked for one.
  const batchAllocs = (batch) => [...batch].filter((_, i) => i % 2 === 0 && batch[i + 1] >= 0);
  const allocated = new Set(
    events.flatMap((e) => (e.name === 'onStorageAlloc' ? [e.args[0].id] : e.name === 'onStorageBatch' ? batchAllocs(e.args[0]) : [])),
  );
  let nextId = 1e9;
  const REPLAYS = 200;
  const prepared = [];
  for (let r = 0; r < REPLAYS; r++) {
    const fresh = new Map();
    const idOf = (id) => {
      if (!allocated.has(id)) return id;
      let c = fresh.get(id);
      if (c === undefined) fresh.set(id, (c = nextId++));
      return c;
    };
    const clones = new Map();
    const storage = (s) => {
      if (!allocated.has(s.id)) return s;
      let c = clones.get(s);
      if (c === undefined) clones.set(s, (c = { ...s, id: idOf(s.id) }));
      return c;
    };
    const tensor = (t) => ({ ...t, storage: storage(t.storage) });
    const arg = (a) =>
      Array.isArray(a)
        ? a.map((x) => (x && 'x' in x ? { x: tensor(x.x), grad: x.grad ? tensor(x.grad) : null } : tensor(x)))
        : a && 'storage' in a
          ? tensor(a)
          : a && 'bytes' in a
            ? storage(a)
            : a;
    const args = (e) =>
      e.name === 'onStorageBatch' ? [e.args[0].map((x, i) => (i % 2 === 0 ? idOf(x) : x)), ...e.args.slice(1)] : e.args.map(arg);
    prepared.push(events.map((e) => ({ name: e.name, args: args(e), ctx: { phase: e.phase, module: null, kernel: null, step: 0, seq: 0 } })));
  }
  let best = Infinity;
  for (let rep = 0; rep < 15; rep++) {
    const sink = new MemRecorder();
    const c0 = process.cpuUsage();
    prepared.forEach((step, i) => {
      for (const e of step) deliver(sink, e);
      // As in the timed rounds: module statistics are reset every stepsPerRound-ish steps.
      if (i % 20 === 19) sink.resetModStats();
    });
    const c = process.cpuUsage(c0);
    best = Math.min(best, (c.user + c.system) / 1000 / REPLAYS);
  }
  return best;
}

await useDemoBackend('wasm');
console.log(
  `MemTracker overhead, demo model Dense(${DEMO_SHAPE.inputs}→${DEMO_SHAPE.hidden}) → BatchNorm → Dense(${DEMO_SHAPE.hidden}→${DEMO_SHAPE.outputs}) + Adam, wasm backend`,
);
let overTarget = false;
if (ROUNDS > 0) {
  console.log(
    `1. Training runs, each a fresh process tracked (or not) from its first step to its last, after ${WARMUP_STEPS} warm-up steps; ` +
      `${ROUNDS} rounds of ${RUN_MODES.map((mode) => MODE_NAMES[mode]).join(' / ')} runs`,
  );
}
for (const config of ROUNDS > 0 ? RUNS : []) {
  const { cpu, wall, paired } = trainingRuns(config);
  const ratio = median(cpu.tracked) / median(cpu.plain);
  const interval = ratioInterval(cpu.tracked, cpu.plain, median);
  if (config.batchSize === 1 && ratio > TARGET) overTarget = true;
  console.log(
    `batch ${String(config.batchSize).padStart(2)}: CPU ms/step untracked ${fmt(median(cpu.plain))} (${spread(cpu.plain)}), ` +
      `MemTracker ${fmt(median(cpu.tracked))} (${spread(cpu.tracked)})` +
      (cpu.adapter.length > 0 ? `, adapter only ${fmt(median(cpu.adapter))}` : '') +
      (cpu.subscribed.length > 0 ? `, adapter delivering MemTracker's events to a no-op sink ${fmt(median(cpu.subscribed))}` : '') +
      ` → ratio ${fmt(ratio)} (95 % bootstrap interval over rounds ${fmt(interval.low)}–${fmt(interval.high)}` +
      (cpu.adapter.length > 0 ? `; adapter alone ${fmt(median(cpu.adapter) / median(cpu.plain))}` : '') +
      (cpu.subscribed.length > 0 ? `, with MemTracker's events ${fmt(median(cpu.subscribed) / median(cpu.plain))}` : '') +
      '); ' +
      `median of per-round ratios ${fmt(median(paired))} (${spread(paired)}); wall ratio ${fmt(median(wall.tracked) / median(wall.plain))}` +
      (config.batchSize === 1 ? `; target ≤ ${TARGET.toFixed(2)}: ${verdict(ratio, interval, TARGET, true)}` : ''),
  );
}

console.log('2. MemTracker\'s own event handling, one recorded step replayed into it');
for (const { batchSize } of RUNS) {
  const run = createDemoRun({ ...DEMO_SHAPE, batchSize });
  run.train(20);
  const sinkMs = replayedSinkMs(run);
  console.log(`batch ${String(batchSize).padStart(2)}: ${(sinkMs * 1000).toFixed(1)} µs/step`);
  run.dispose();
}

if (SWITCH_ROUNDS > 0) {
  console.log(`3. Switching tracking on and off in one process: ${SWITCH_ROUNDS} interleaved rounds, ${SETTLE} settle steps after each switch`);
  for (const { batchSize, stepsPerRound, settleSteps, warmupSteps } of CONFIGS) {
    const run = createDemoRun({ ...DEMO_SHAPE, batchSize });
    const tracker = new MemTracker();
    tracker.trackExternal(run.model, run.optimizer, run.xs, run.ys);
    const modes = ['plain', 'adapter', 'subscribed', 'tracked'];
    for (const mode of modes) timeSteps(run, 0, warmupSteps, mode, tracker);
    const series = Object.fromEntries(modes.map((mode) => [mode, { cpu: [], wall: [] }]));
    for (let r = 0; r < SWITCH_ROUNDS; r++) {
      globalThis.gc?.();
      for (let k = 0; k < modes.length; k++) {
        const mode = modes[(r + k) % modes.length];
        const t = timeSteps(run, settleSteps, stepsPerRound, mode, tracker);
        series[mode].cpu.push(t.cpu);
        series[mode].wall.push(t.wall);
      }
    }
    const m = (mode) => median(series[mode].cpu);
    console.log(
      `batch ${String(batchSize).padStart(2)}: CPU ms/step untracked ${fmt(m('plain'))}, adapter only ${fmt(m('adapter'))}, ` +
        `adapter delivering MemTracker's events to a no-op sink ${fmt(m('subscribed'))}, MemTracker ${fmt(m('tracked'))} → ` +
        `ratio ${fmt(m('tracked') / m('plain'))} (adapter alone ${fmt(m('adapter') / m('plain'))}); ` +
        `wall ratio ${fmt(median(series.tracked.wall) / median(series.plain.wall))}`,
    );
    run.dispose();
  }
}
// 4. Instructions per training step, counted exactly (opt in: MEMSCOPE_BENCH_CALLGRIND=1, needs
// valgrind; ~25 min with WARMUP_STEPS warm-up steps). Times on this kind of machine move ±20 %
// between identical processes, more than the effect being measured; instruction counts under `node --predictable` with fixed seeds
// repeat to ~0.1 %. Each mode runs twice, with SHORT and LONG timed batches after the same warm-up;
// the difference / extra steps is the cost of a steady-state step, start-up and warm-up cancelling.
// Instructions are not time (cache misses and the threads --predictable turns off are not in
// them), so this explains the ratio in part 1 rather than replacing it.
// With MEMSCOPE_BENCH_CALLGRIND=functions the processes also run under --perf-basic-prof: each mode's
// step is printed without V8's compilers, and the extra instructions of each mode over untracked
// are listed by function (bench/callgrind-functions.mjs names V8's JIT code); V8's compilers are
// one line, since their share moves between windows (by up to ~0.5 M instructions per step even
// after 4,000 warm-up steps) and between two builds of memscope, which therefore compare by the
// instructions besides them.
const CALLGRIND = process.env.MEMSCOPE_BENCH_CALLGRIND;
/** Part 4's modes (all unless narrowed): a build compared with another needs only the modes it changes. */
const CALLGRIND_MODES = envList('MEMSCOPE_BENCH_CALLGRIND_MODES', ['plain', 'adapter', 'subscribed', 'tracked']);
if (CALLGRIND === '1' || CALLGRIND === 'functions') {
  const byFunction = CALLGRIND === 'functions';
  const outDir = byFunction ? mkdtempSync(join(tmpdir(), 'memscope-callgrind-')) : null;
  const WARMUP = Number(process.env.MEMSCOPE_BENCH_CALLGRIND_WARMUP ?? WARMUP_STEPS);
  if (!Number.isInteger(WARMUP) || WARMUP < 1) {
    throw new Error(`MEMSCOPE_BENCH_CALLGRIND_WARMUP=${process.env.MEMSCOPE_BENCH_CALLGRIND_WARMUP}: expected a whole number of steps ≥ 1`);
  }
  const [SHORT, LONG, STEPS] = [1, 6, 40];
  const outputs = {};
  const count = (mode, batches) =>
    new Promise((resolvePromise, reject) => {
      const outFile = outDir === null ? '/dev/null' : join(outDir, `${mode}.${batches}.out`);
      const args = ['--tool=callgrind', `--callgrind-out-file=${outFile}`, '--cache-sim=no', '--branch-sim=no', process.execPath];
      args.push('--single-threaded', '--predictable', '--random-seed=42', '--hash-seed=42');
      if (byFunction) args.push('--perf-basic-prof');
      (outputs[mode] ??= {})[batches === SHORT ? 'short' : 'long'] = outFile;
      args.push(join(here, 'memtracker-child.mjs'), mode, '1', String(WARMUP), String(batches), String(STEPS));
      const child = spawn('valgrind', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      child.stderr.on('data', (d) => (err += d));
      child.on('error', reject);
      child.on('close', (code) => {
        const m = /Collected : (\d+)/.exec(err);
        if (code !== 0 || !m) reject(new Error(`valgrind ${mode} ${batches}: exit ${code}\n${err.slice(-500)}`));
        else resolvePromise(Number(m[1]));
      });
    });
  console.log(`4. Instructions per steady-state training step at batch 1 (callgrind, node --predictable; ${WARMUP} warm-up steps, ${(LONG - SHORT) * STEPS} counted)`);
  const perStep = {};
  for (const mode of CALLGRIND_MODES) {
    // The two lengths of one mode run side by side (two cores).
    const [a, b] = await Promise.all([count(mode, SHORT), count(mode, LONG)]);
    perStep[mode] = (b - a) / ((LONG - SHORT) * STEPS);
  }
  const label = { plain: 'untracked', adapter: 'adapter alone', subscribed: "with MemTracker's events to a no-op sink", tracked: 'MemTracker' };
  console.log(
    CALLGRIND_MODES.map(
      (mode) =>
        `${label[mode]} ${(perStep[mode] / 1e6).toFixed(3)} M instructions/step` +
        (mode !== 'plain' && perStep.plain !== undefined ? ` (×${(perStep[mode] / perStep.plain).toFixed(3)})` : ''),
    ).join('; '),
  );
  if (outDir !== null) {
    const read = (mode) => ({ short: selfInstructions(outputs[mode].short), long: selfInstructions(outputs[mode].long) });
    // Each mode's own step without V8's compilers, whose share moves between windows and between
    // builds: what two builds of memscope compare by.
    const nothing = { short: new Map(), long: new Map() };
    for (const mode of CALLGRIND_MODES) {
      const own = perStepDifference(nothing, read(mode), (LONG - SHORT) * STEPS);
      const compilers = own.get('(V8 compilers)') ?? 0;
      const total = [...own.values()].reduce((a, b) => a + b, 0);
      console.log(`${label[mode]}: ${((total - compilers) / 1e6).toFixed(3)} M instructions/step besides V8's compilers (${(compilers / 1e6).toFixed(3)} M)`);
    }
    const plain = CALLGRIND_MODES.includes('plain') ? read('plain') : null;
    for (const mode of plain === null ? [] : ['adapter', 'tracked'].filter((m) => CALLGRIND_MODES.includes(m))) {
      const diff = perStepDifference(plain, read(mode), (LONG - SHORT) * STEPS);
      const compilers = diff.get('(V8 compilers)') ?? 0;
      diff.delete('(V8 compilers)');
      const rest = [...diff.values()].reduce((a, b) => a + b, 0);
      console.log(
        `${mode === 'tracked' ? 'MemTracker' : 'adapter alone'} − untracked, per step: ${(rest / 1e3).toFixed(1)} K instructions ` +
          `besides V8's compilers (${compilers >= 0 ? '+' : ''}${(compilers / 1e3).toFixed(1)} K); the largest differences:`,
      );
      for (const [name, d] of [...diff].sort((x, y) => Math.abs(y[1]) - Math.abs(x[1])).slice(0, 15)) {
        console.log(`  ${d >= 0 ? '+' : ''}${(d / 1e3).toFixed(1).padStart(7)} K  ${name.slice(0, 110)}`);
      }
    }
    // node leaves a perf map (megabytes) per process it ran with --perf-basic-prof.
    for (const mode of Object.keys(outputs)) {
      for (const file of Object.values(outputs[mode])) {
        const map = perfMapOf(file);
        if (map !== null) rmSync(map, { force: true });
      }
    }
    rmSync(outDir, { recursive: true, force: true });
  }
}
if (overTarget) console.log(`batch 1 is over target: profile with node --cpu-prof bench/memtracker-child.mjs tracked 1 ${WARMUP_STEPS} 40 40`);
