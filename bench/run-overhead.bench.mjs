// `memscope run` overhead: wall time of the fixture training script (an MLP
// with BatchNorm + Adam, trainOnBatch, cpu backend, 60 steps) run plainly,
// under `memscope run`, and under `memscope run --stacks`. Median of 5 runs
// each, interleaved so machine load affects all three alike. Includes Node
// start-up, module loading and (for memscope) the parent CLI process. On Linux
// it also reports CPU time (user + system of the finished child processes,
// from /proc/self/stat), which a loaded machine disturbs far less than wall time.
// Last, one `--stacks` run of the same script with its planted leak checks that
// the stacks recorded are deep enough to reach the script's own line, and a
// 200-step capture of it times `memscope leaks`.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const script = join(root, 'test/fixtures/scripts/train.mjs');
const cli = join(root, 'dist/cli/memscope.cjs');
const out = join(root, 'bench/out');
mkdirSync(out, { recursive: true });
const variants = {
  plain: [script, '--steps', '60'],
  // The child alone: the preload in the program's process, without the parent CLI.
  'preload only': ['--import', join(root, 'dist/cli/run-preload.js'), script, '--steps', '60'],
  'memscope run': [cli, 'run', '-q', '-o', join(out, 'overhead.ndjson'), script, '--steps', '60'],
  'memscope run --stacks': [cli, 'run', '-q', '--stacks', '-o', join(out, 'overhead-stacks.ndjson'), script, '--steps', '60'],
};
const cliStart = [];
for (let i = 0; i < 5; i++) {
  const t = performance.now();
  spawnSync(process.execPath, [cli, '--version'], { cwd: root });
  cliStart.push(performance.now() - t);
}
const times = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
const cpu = Object.fromEntries(Object.keys(variants).map((k) => [k, []]));
/** Seconds of CPU used by waited-for child processes so far (cutime + cstime), or null off Linux. */
function childCpuSeconds() {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100; // clock ticks (USER_HZ = 100)
  } catch {
    return null;
  }
}
for (let i = 0; i < 5; i++) {
  for (const [name, args] of Object.entries(variants)) {
    const t = performance.now();
    const cpu0 = childCpuSeconds();
    const env = name === 'preload only' ? { ...process.env, MEMSCOPE_RUN_OUTPUT: join(out, 'overhead-preload.ndjson') } : process.env;
    const r = spawnSync(process.execPath, args, { cwd: root, env, stdio: ['ignore', 'ignore', 'pipe'] });
    if (r.status !== 0) throw new Error(`${name} failed: ${r.stderr}`);
    times[name].push(performance.now() - t);
    if (cpu0 !== null) cpu[name].push(childCpuSeconds() - cpu0);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const base = median(times.plain);
console.log(`memscope CLI start-up (--version): median ${(median(cliStart) / 1000).toFixed(2)} s`);
for (const [name, xs] of Object.entries(times)) {
  console.log(`${name.padEnd(24)} median ${(median(xs) / 1000).toFixed(2)} s  ×${(median(xs) / base).toFixed(2)}  [${xs.map((x) => (x / 1000).toFixed(2)).join(', ')}]`);
}
if (cpu.plain.length > 0) {
  const cpuBase = median(cpu.plain);
  for (const [name, xs] of Object.entries(cpu)) {
    console.log(`${`${name} (CPU)`.padEnd(24)} median ${median(xs).toFixed(2)} s  ×${(median(xs) / cpuBase).toFixed(2)}  [${xs.map((x) => x.toFixed(2)).join(', ')}]`);
  }
}

// The stacks are worth their cost only if they reach the program's line.
const leakCapture = join(out, 'overhead-leak.ndjson');
const leakRun = spawnSync(process.execPath, [cli, 'run', '-q', '--stacks', '-o', leakCapture, script, '--steps', '60', '--leak'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
if (leakRun.status !== 0) throw new Error(`leak run failed: ${leakRun.stderr}`);
const leaks = spawnSync(process.execPath, [cli, 'leaks', '--json', leakCapture], { cwd: root, encoding: 'utf8' });
const site = JSON.parse(leaks.stdout).leaks[0]?.site ?? null;
const expected = `${script}:${readFileSync(script, 'utf8').split('\n').findIndex((l) => l.includes('planted leak')) + 1}:`;
console.log(`--stacks leak located at ${site ?? '(none)'} ${site?.startsWith(expected) ? '(the script\'s own line)' : `(expected ${expected}…)`}`);

// `memscope leaks` on a 200-step training capture (with stacks and a planted leak): CLI
// start-up, reading the capture and judging it. Median of 3.
const longCapture = join(out, 'leaks-200-steps.ndjson');
const longRun = spawnSync(process.execPath, [cli, 'run', '-q', '--stacks', '-o', longCapture, script, '--steps', '200', '--leak'], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
if (longRun.status !== 0) throw new Error(`200-step run failed: ${longRun.stderr}`);
const leaksTimes = [];
for (let i = 0; i < 3; i++) {
  const t = performance.now();
  const r = spawnSync(process.execPath, [cli, 'leaks', longCapture], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 3) throw new Error(`memscope leaks exited ${r.status}: ${r.stderr}`);
  leaksTimes.push(performance.now() - t);
}
console.log(`memscope leaks, 200-step capture: median ${(median(leaksTimes) / 1000).toFixed(2)} s  [${leaksTimes.map((x) => (x / 1000).toFixed(2)).join(', ')}]`);
