// The allocator model's cost: (1) replaying the largest real trace
// (transformer_fullstep_trace.pickle: 19,770 events, ~1,000 segments) —
// events per second, excluding the pickle read; (2) replaying a 100 MB snapshot
// (31 replicas of that trace, made by bench/make-big-snapshot.mjs with the
// replicas' addresses 2^37 apart so that they never share one, cached in
// bench/out/) — events per second beyond reading, the figure issue 30 sets at
// ≥ 2M; (3) the TFJS-binding hot path under pressure — malloc/free pairs per
// second with 100,000 live small blocks and every other one freed (50,000
// cached holes in the small pool).
//
//   npm run bench -- allocator
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readPickle, toPlain } from '../dist/torch/pickle/reader.js';
import { replaySnapshot } from '../dist/allocator/replay.js';
import { readReplaySnapshot } from '../dist/allocator/read-snapshot-node.js';
import { CachingAllocatorModel } from '../dist/allocator/caching-allocator.js';
import { benchInput } from './inputs.mjs';
import { makeBigSnapshot } from './make-big-snapshot.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const source = benchInput('torch/transformer_fullstep_trace.pickle');

// CPU time of this process (user + system), in ms: on a shared machine wall time also counts other processes.
const cpuNow = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const raw = toPlain(readPickle(new Uint8Array(readFileSync(source))));
const events = raw.device_traces[0].length;
const replayMs = [];
for (let r = 0; r < 5; r++) {
  const t0 = cpuNow();
  const report = replaySnapshot(raw);
  replayMs.push(cpuNow() - t0);
  if (report.devices[0].allocAddresses.rate !== 1) throw new Error('replay fidelity dropped below 100%');
}
const ms = median(replayMs);
console.log(`replay fullstep trace: ${events} events in ${ms.toFixed(0)} CPU ms (median of 5) (${Math.round(events / (ms / 1000)).toLocaleString('en-US')} events/s, incl. start-state reconstruction and end-state comparison)`);

const out = join(here, 'out');
mkdirSync(out, { recursive: true });
const big = join(out, 'replay-100mb.pickle');
if (!existsSync(big)) makeBigSnapshot(source, big, 100 * 2 ** 20, 2 ** 37);
let t0 = performance.now();
const bigSnap = readReplaySnapshot(big);
const readMs = performance.now() - t0;
const bigEvents = bigSnap.traces.reduce((n, t) => n + t.length, 0);
const bigCpu = [];
const bigWall = [];
for (let r = 0; r < 3; r++) {
  globalThis.gc?.();
  const c0 = cpuNow();
  t0 = performance.now();
  const report = replaySnapshot(bigSnap);
  bigWall.push(performance.now() - t0);
  bigCpu.push(cpuNow() - c0);
  if (report.devices[0].traceEvents !== bigEvents) throw new Error('the 100 MB replay did not cover every event');
}
const bigCpuMs = median(bigCpu);
const bigWallMs = median(bigWall);
const perS = (ms) => Math.round(bigEvents / (ms / 1000)).toLocaleString('en-US');
console.log(
  `replay 100 MB snapshot: ${bigEvents.toLocaleString('en-US')} events beyond a ${readMs.toFixed(0)} ms read: ${bigCpuMs.toFixed(0)} CPU ms (${perS(bigCpuMs)} events/s), ` +
    `${bigWallMs.toFixed(0)} wall ms (${perS(bigWallMs)} events/s), median of 3; target ≥ 2,000,000 events/s`,
);

const m = new CachingAllocatorModel();
const live = [];
for (let i = 0; i < 100_000; i++) live.push(m.malloc(512 + (i % 5) * 512));
for (let i = 0; i < live.length; i += 2) m.free(live[i]);
const PAIRS = 20_000;
const pairMs = [];
for (let r = 0; r < 5; r++) {
  const t0 = cpuNow();
  for (let i = 0; i < PAIRS; i++) m.free(m.malloc(512 + (i % 9) * 512));
  pairMs.push(cpuNow() - t0);
}
const p = median(pairMs);
console.log(`malloc+free with 50,000 cached small holes: ${((p * 1000) / PAIRS).toFixed(2)} CPU µs per pair (median of 5 × ${PAIRS.toLocaleString('en-US')})`);
