// Long captures: `memscope leaks` and `memscope report` on captures of a long training run, made
// from the real capture in test/fixtures (bench/make-big-capture.mjs, cached in bench/out/): 100 MB,
// and 600 MB, which is past the longest string the engine can make (2^29 characters), so it opens
// only because the reader never holds the file as one string. Each run is a fresh process: wall
// time, CPU time and peak RSS, against the same run's baseline — Node reading the file in pieces
// and JSON.parse-ing every line, the least any reader of this format does.
//
//   npm run bench -- capture            (MEMSCOPE_CAPTURE_BENCH_MB=100,600 sets the sizes)
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchInput } from './inputs.mjs';
import { makeBigCapture } from './make-big-capture.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const RUNS = 3;
const SIZES = (process.env.MEMSCOPE_CAPTURE_BENCH_MB ?? '100,600').split(',').map(Number);
const cli = resolve(here, '../dist/cli/memscope.cjs');
const out = join(here, 'out');
mkdirSync(out, { recursive: true });

// The child reports its CPU time and peak RSS on exit.
const ON_EXIT = `data:text/javascript,process.on('exit',()=>{const u=process.cpuUsage();process.stderr.write('\\nbench-exit '+(u.user+u.system)/1000+' '+process.resourceUsage().maxRSS*1024+'\\n')})`;
const BASELINE = `
import { openSync, readSync } from 'node:fs';
const fd = openSync(process.argv[1], 'r');
const buf = Buffer.alloc(8 << 20);
let carried = 0, lines = 0;
for (let n; (n = readSync(fd, buf, carried, buf.length - carried, null)) > 0; ) {
  const have = carried + n;
  const cut = buf.lastIndexOf(0x0a, have - 1) + 1;
  for (const line of buf.toString('utf8', 0, cut).split('\\n')) if (line) { JSON.parse(line); lines++; }
  buf.copy(buf, 0, cut, have);
  carried = have - cut;
}
process.stdout.write(lines + ' lines\\n');`;

function once(args, okStatus) {
  const devNull = openSync('/dev/null', 'w');
  try {
    const t = performance.now();
    const r = spawnSync(process.execPath, ['--import', ON_EXIT, ...args], { stdio: ['ignore', devNull, 'pipe'], encoding: 'utf8' });
    const ms = performance.now() - t;
    if (!okStatus.includes(r.status)) throw new Error(`${args.join(' ')} failed (${r.status}): ${r.stderr.slice(-400)}`);
    const m = /bench-exit ([\d.]+) (\d+)/.exec(r.stderr);
    if (!m) throw new Error(`${args.join(' ')}: no exit figures`);
    return { ms, cpuMs: Number(m[1]), rss: Number(m[2]) };
  } finally {
    closeSync(devNull);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function measure(args, okStatus = [0]) {
  const runs = Array.from({ length: RUNS }, () => once(args, okStatus));
  return { ms: median(runs.map((r) => r.ms)), cpuMs: median(runs.map((r) => r.cpuMs)), rss: median(runs.map((r) => r.rss)) };
}
const s = (ms) => `${(ms / 1000).toFixed(2)} s`;
const mib = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;

const source = benchInput('captures/train-leak.capture.ndjson');
for (const size of SIZES) {
  const file = join(out, `capture-${size}mb.ndjson`);
  if (!existsSync(file)) {
    const made = makeBigCapture(source, file, size * 1e6);
    console.log(`made ${file}: ${made.steps.toLocaleString('en-US')} steps, ${made.events.toLocaleString('en-US')} allocs and frees`);
  }
  const html = join(out, `capture-${size}mb.html`);
  const base = measure(['--input-type=module', '-e', BASELINE, file]);
  // leaks exits 3 when it finds leaks, as it does here.
  const leaks = measure([cli, 'leaks', file], [0, 3]);
  const report = measure([cli, 'report', file, '-o', html]);
  rmSync(html, { force: true });
  const row = (name, m) =>
    `  ${name.padEnd(22)} ${s(m.ms)} wall, ${s(m.cpuMs)} CPU, peak RSS ${mib(m.rss)}  (${(m.ms / base.ms).toFixed(2)}× the baseline's time, ${(m.rss / base.rss).toFixed(2)}× its memory)`;
  console.log(`capture of ${size} MB (median of ${RUNS} fresh processes):`);
  console.log(`  ${'baseline: JSON.parse'.padEnd(22)} ${s(base.ms)} wall, ${s(base.cpuMs)} CPU, peak RSS ${mib(base.rss)}`);
  console.log(row('memscope leaks', leaks));
  console.log(row('memscope report', report));
}
