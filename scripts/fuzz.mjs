#!/usr/bin/env node
// The long fuzz run: mutants of the real snapshot corpus (../shared/fixtures/torch-snapshots/corpus),
// the Kineto traces (../shared/fixtures/torch-traces, cut down), an export_memory_timeline file
// and a memscope capture, through every reader of the built package (dist/; `npm run fuzz` builds
// first). Every outcome must be a result or a MemscopeError.
//
// The readers run in a worker thread with a heap limit, one input at a time, watched from here:
// an input that takes longer than the time limit is a hang (the worker is terminated and a new one
// started), one that runs the worker out of heap or pushes the process's memory past the limit is
// a memory blow-up. Inputs behind a crash, hang or blow-up are written to the output folder with
// the reader, message and stack, so each can be replayed.
//
// usage: node scripts/fuzz.mjs [--count 10000] [--seed 1] [--time-limit-ms 30000] [--heap-mb 2048]
//        [--rss-mb 4096] [--out bench/out/fuzz]
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort } from 'node:worker_threads';
import { gunzipSync } from 'node:zlib';
import { cutTrace, mulberry32, mutate, readersFor, runReaders, timelineSeed } from './fuzz-core.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const dist = resolve(here, '../dist');

async function loadApi() {
  const torch = await import(join(dist, 'torch/index.js'));
  const decoder = await import(join(dist, 'torch/snapshot-decoder.js'));
  const capture = await import(join(dist, 'capture/reader.js'));
  const report = await import(join(dist, 'viewer/report-data.js'));
  const errors = await import(join(dist, 'core/errors.js'));
  return {
    api: {
      readSnapshot: torch.readSnapshot,
      readSnapshotPieces: decoder.readSnapshotPieces,
      readerOf: decoder.readerOf,
      normaliseSnapshot: torch.normaliseSnapshot,
      readPickle: torch.readPickle,
      fragmentation: torch.fragmentation,
      formatFrame: torch.formatFrame,
      readChromeTrace: torch.readChromeTrace,
      readMemoryTimeline: torch.readMemoryTimeline,
      parseCapture: capture.parseCapture,
      captureToReport: report.captureToReport,
      MemscopeError: errors.MemscopeError,
    },
    isMemscopeError: errors.isMemscopeError,
  };
}

if (!isMainThread) {
  // Worker: reads each input it is sent with every reader of its kind and answers with the outcomes.
  const { api, isMemscopeError } = await loadApi();
  const readers = readersFor(api);
  parentPort.on('message', ({ index, kind, bytes }) => {
    const outcomes = runReaders(readers, kind, bytes, isMemscopeError);
    parentPort.postMessage({ index, outcomes, rssBytes: process.memoryUsage().rss });
  });
  parentPort.postMessage({ ready: true });
} else {
  await main();
}

function option(args, name, fallback) {
  const i = args.indexOf(`--${name}`);
  return i >= 0 && i + 1 < args.length ? args[i + 1] : fallback;
}

/** A memscope capture written by the built writer: modules, storages, frees, a kernel, the end record. */
async function captureSeed() {
  const { CaptureWriter } = await import(join(dist, 'capture/writer.js'));
  const { CaptureRecorder } = await import(join(dist, 'capture/recorder.js'));
  let text = '';
  const writer = new CaptureWriter({ write: (c) => (text += c) }, { created: '2026-01-01', argv: ['train.js'], backend: null, stacks: true, maxEntries: null });
  const rec = new CaptureRecorder(writer, { stacks: true });
  const parent = { id: 1, path: 'model', className: 'Sequential', parent: null, children: [], parameters: () => [], buffers: () => [] };
  const child = { id: 2, path: 'model.0', className: 'Dense', parent, children: [], parameters: () => [], buffers: () => [] };
  for (let step = 0; step < 5; step++) {
    const ctx = { phase: 'forward', module: child, kernel: 'MatMul', step, seq: step };
    rec.onModuleEnter(parent, [], ctx);
    rec.onModuleEnter(child, [], ctx);
    rec.onStorageAlloc({ id: 10 + step, device: 'webgl', bytes: 4096 * (step + 1), dtype: 'float32', shape: [1024 * (step + 1)] }, ctx);
    if (step > 0) rec.onStorageFree({ id: 9 + step, device: 'webgl', bytes: 4096 * step, dtype: 'float32', shape: [1024 * step] }, ctx);
    rec.onModuleExit(child, [], ctx);
    rec.onModuleExit(parent, [], ctx);
  }
  rec.finish({ exitCode: 0, error: null });
  return text;
}

async function seeds() {
  const shared = resolve(here, '../../shared/fixtures');
  const corpus = join(shared, 'torch-snapshots/corpus');
  const traces = join(shared, 'torch-traces');
  let names;
  try {
    names = readdirSync(corpus).filter((f) => f.endsWith('.pickle')).sort();
  } catch {
    throw new Error(`the corpus is missing: ${corpus} (the fuzz run needs ../shared beside the clone)`);
  }
  const encode = (s) => new TextEncoder().encode(s);
  const out = names.map((f) => ({ name: f, kind: 'pickle', bytes: new Uint8Array(readFileSync(join(corpus, f))) }));
  for (const f of readdirSync(traces).filter((x) => x.endsWith('.json.gz')).sort()) {
    out.push({ name: f, kind: 'trace', bytes: encode(cutTrace(gunzipSync(readFileSync(join(traces, f))).toString('utf8'))) });
  }
  out.push({ name: 'memory_timeline.json', kind: 'timeline', bytes: encode(timelineSeed()) });
  out.push({ name: 'capture.ndjson', kind: 'capture', bytes: encode(await captureSeed()) });
  return out;
}

async function main() {
  const args = process.argv.slice(2);
  const count = Number(option(args, 'count', 10_000));
  const seed = Number(option(args, 'seed', 1));
  const timeLimitMs = Number(option(args, 'time-limit-ms', 30_000));
  const heapMb = Number(option(args, 'heap-mb', 2048));
  const rssLimit = Number(option(args, 'rss-mb', 4096)) * 2 ** 20;
  const outDir = resolve(option(args, 'out', join(here, '../bench/out/fuzz')));
  mkdirSync(outDir, { recursive: true });
  const inputs = await seeds();
  const rand = mulberry32(seed);

  let worker = null;
  let pending = null;
  const startWorker = async () => {
    const w = new Worker(fileURLToPath(import.meta.url), { resourceLimits: { maxOldGenerationSizeMb: heapMb } });
    worker = w;
    // Events of a worker already replaced (its exit after terminate) are not about the input now read.
    w.on('message', (m) => worker === w && pending?.(m));
    w.on('error', (err) => worker === w && pending?.({ failed: err }));
    w.on('exit', (code) => worker === w && pending?.({ failed: new Error(`worker exited with code ${code}`) }));
    await new Promise((ok) => (pending = ok));
    pending = null;
  };
  const readOne = (index, kind, bytes) =>
    new Promise((done) => {
      const timer = setTimeout(() => done({ hang: true }), timeLimitMs);
      pending = (m) => {
        clearTimeout(timer);
        pending = null;
        done(m);
      };
      worker.postMessage({ index, kind, bytes });
    });

  await startWorker();
  const tally = new Map(); // reader → { result, error, crash, codes: Map }
  const groups = new Map(); // problem signature → { count, examples }
  let slowest = { ms: 0, what: '' };
  let peakRss = 0;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const input = inputs[Math.floor(rand() * inputs.length)];
    const bytes = mutate(input.bytes, rand, input.kind !== 'pickle');
    const t = performance.now();
    const reply = await readOne(i, input.kind, bytes);
    const ms = performance.now() - t;
    const what = `mutant ${i} of ${input.name} (seed ${seed})`;
    const keep = (kind, detail) => {
      // Grouped by reader, message and the frame that threw: one cause found by many mutants is one line.
      const frame = /\n\s+at ([^\n]*)/.exec(detail.stack ?? '')?.[1] ?? '';
      const signature = `${kind} ${detail.reader ?? ''}: ${detail.message} ${frame ? `at ${frame}` : ''}`.trim();
      const group = groups.get(signature) ?? { count: 0, examples: [] };
      group.count++;
      groups.set(signature, group);
      if (group.examples.length >= 3) return;
      const file = join(outDir, `${kind}-${i}-${input.name.replace(/[^\w.+-]/g, '_')}.bin`);
      writeFileSync(file, bytes);
      group.examples.push({ what, file, stack: detail.stack });
    };
    if (reply.hang || reply.failed) {
      keep(reply.hang ? 'hang' : 'memory', { message: reply.hang ? `no answer within ${timeLimitMs} ms` : String(reply.failed?.message ?? reply.failed) });
      const old = worker;
      worker = null;
      await old.terminate().catch(() => {});
      await startWorker();
      continue;
    }
    if (ms > slowest.ms) slowest = { ms, what };
    peakRss = Math.max(peakRss, reply.rssBytes);
    for (const o of reply.outcomes) {
      const row = tally.get(o.reader) ?? { result: 0, error: 0, crash: 0, codes: new Map() };
      row[o.outcome]++;
      if (o.code) row.codes.set(o.code, (row.codes.get(o.code) ?? 0) + 1);
      tally.set(o.reader, row);
      if (o.outcome === 'crash') keep('crash', { reader: o.reader, message: o.message, stack: o.stack });
    }
    if (reply.rssBytes > rssLimit) {
      keep('memory', { message: `process RSS ${Math.round(reply.rssBytes / 2 ** 20)} MB after this input` });
      const old = worker;
      worker = null;
      await old.terminate().catch(() => {});
      await startWorker();
    }
    if ((i + 1) % 500 === 0) console.error(`${i + 1}/${count} mutants, ${[...groups.values()].reduce((n, g) => n + g.count, 0)} problems, ${((performance.now() - started) / 1000).toFixed(0)} s`);
  }
  await worker.terminate();
  const summary = {
    mutants: count,
    seed,
    seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    seeds: inputs.length,
    timeLimitMs,
    heapMb,
    slowestMs: Math.round(slowest.ms),
    slowest: slowest.what,
    peakRssMb: Math.round(peakRss / 2 ** 20),
    readers: Object.fromEntries([...tally].map(([name, r]) => [name, { result: r.result, error: r.error, crash: r.crash, codes: Object.fromEntries([...r.codes].sort((a, b) => b[1] - a[1])) }])),
    problems: Object.fromEntries([...groups].sort((a, b) => b[1].count - a[1].count)),
  };
  writeFileSync(join(outDir, 'summary.json'), JSON.stringify(summary, null, 2));
  console.log(JSON.stringify(summary, null, 2));
  process.exitCode = groups.size > 0 ? 1 : 0;
}
