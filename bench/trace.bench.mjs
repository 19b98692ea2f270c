// Kineto trace reading: memscope's streaming reader vs reading the whole JSON at once, on the two
// real traces in test/fixtures/traces. Each measurement is a fresh process (wall time
// and peak RSS): memscope = read + `summary` figures (peaks, per-operator memory); the baselines
// only parse: CPython's json.load(gzip.open(...)) and Node's JSON.parse of the gunzipped text.
// Three runs each, median reported (the machine is shared; single runs are noisy).
//
// Then `memscope trace` on a 100 MB snapshot (bench/make-big-snapshot.mjs, cached in bench/out/),
// its lines sent to /dev/null, against `memscope summary` on the same file in the same run (the
// read alone, nearly): wall time of fresh processes. Target (issue 30): trace ≤ 2 s.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchInput } from './inputs.mjs';
import { makeBigSnapshot } from './make-big-snapshot.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const FILES = ['kineto_modern_memory.json.gz', 'kineto_2021_resnet50.json.gz'];
const RUNS = 3;

const MEMSCOPE = `
import { readJsonTraceFile } from ${JSON.stringify(join(here, '../dist/torch/chrome-trace-node.js'))};
import { devicePeak, memoryByOperator } from ${JSON.stringify(join(here, '../dist/torch/memory-trace.js'))};
const t = performance.now();
const trace = await readJsonTraceFile(process.argv[1]);
let n = 0;
for (const d of trace.devices) { devicePeak(d); n += memoryByOperator(trace, d).length; }
console.log(JSON.stringify({ ms: performance.now() - t, events: trace.memoryEventCount, rss: process.resourceUsage().maxRSS * 1024 }));`;
const NODE_PARSE = `
const { gunzipSync } = await import('node:zlib'); const { readFileSync } = await import('node:fs');
const t = performance.now();
const v = JSON.parse(gunzipSync(readFileSync(process.argv[1])).toString('utf8'));
console.log(JSON.stringify({ ms: performance.now() - t, events: v.traceEvents.length, rss: process.resourceUsage().maxRSS * 1024 }));`;
const PYTHON = `import json, gzip, sys, time, resource
t = time.perf_counter(); v = json.load(gzip.open(sys.argv[1]))
print(json.dumps({'ms': (time.perf_counter() - t) * 1000, 'events': len(v['traceEvents']), 'rss': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))`;

function once(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function measure(cmd, args) {
  const runs = Array.from({ length: RUNS }, () => once(cmd, args));
  return { ms: median(runs.map((r) => r.ms)), rss: median(runs.map((r) => r.rss)), events: runs[0].events };
}

const mb = (b) => `${(b / 2 ** 20).toFixed(0)} MB`;
for (const f of FILES) {
  const path = benchInput(`traces/${f}`);
  const ms = measure(process.execPath, ['--input-type=module', '-e', MEMSCOPE, path]);
  const np = measure(process.execPath, ['--input-type=module', '-e', NODE_PARSE, path]);
  const py = measure('python3', ['-c', PYTHON, path]);
  console.log(`${f}: memscope read+summary ${ms.ms.toFixed(0)} ms, peak RSS ${mb(ms.rss)} (${ms.events} [memory] events)`);
  console.log(`  Node JSON.parse only  ${np.ms.toFixed(0)} ms, peak RSS ${mb(np.rss)}  → memscope ${(ms.ms / np.ms).toFixed(2)}× the time, ${(ms.rss / np.rss).toFixed(2)}× the memory`);
  console.log(`  CPython json.load only ${py.ms.toFixed(0)} ms, peak RSS ${mb(py.rss)} → memscope ${(ms.ms / py.ms).toFixed(2)}× the time, ${(ms.rss / py.rss).toFixed(2)}× the memory`);
}

const out = join(here, 'out');
mkdirSync(out, { recursive: true });
const big = join(out, 'replay-100mb.pickle');
const source = benchInput('torch/transformer_fullstep_trace.pickle');
if (!existsSync(big)) makeBigSnapshot(source, big, 100 * 2 ** 20, 2 ** 37);
const cli = resolve(here, '../dist/cli/memscope.cjs');
// The child reports its own CPU time (user + system) on exit: on a shared machine wall time also counts other processes.
const CPU_ON_EXIT = `data:text/javascript,process.on('exit',()=>{const u=process.cpuUsage();process.stderr.write('\\nbench-cpu-ms '+(u.user+u.system)/1000+'\\n')})`;
function cliRun(verb) {
  const devNull = openSync('/dev/null', 'w');
  try {
    const t = performance.now();
    const r = spawnSync(process.execPath, ['--import', CPU_ON_EXIT, cli, verb, big], { stdio: ['ignore', devNull, 'pipe'], encoding: 'utf8' });
    const ms = performance.now() - t;
    if (r.status !== 0) throw new Error(`memscope ${verb} failed: ${r.stderr}`);
    const cpu = /bench-cpu-ms ([\d.]+)/.exec(r.stderr);
    if (!cpu) throw new Error(`memscope ${verb}: no CPU time reported`);
    return { ms, cpuMs: Number(cpu[1]) };
  } finally {
    closeSync(devNull);
  }
}
const verbRuns = (verb) => Array.from({ length: RUNS }, () => cliRun(verb));
const traceRuns = verbRuns('trace');
const summaryRuns = verbRuns('summary');
const tMs = median(traceRuns.map((r) => r.ms));
const sMs = median(summaryRuns.map((r) => r.ms));
const tCpu = median(traceRuns.map((r) => r.cpuMs));
const sCpu = median(summaryRuns.map((r) => r.cpuMs));
console.log(
  `memscope trace, 100 MB snapshot, to /dev/null: ${(tMs / 1000).toFixed(2)} s wall, ${(tCpu / 1000).toFixed(2)} s CPU; ` +
    `summary of the same file ${(sMs / 1000).toFixed(2)} s wall, ${(sCpu / 1000).toFixed(2)} s CPU ` +
    `→ trace ${(tMs / sMs).toFixed(2)}× summary (median of ${RUNS}); target ≤ 2 s`,
);
