// Every snapshot verb of the built CLI on every real snapshot of the corpus, and the trace verbs
// on both Kineto traces: exit 0 with output and no exception, or (a verb that needs a snapshot,
// given a trace) memscope's one-line refusal. `npm run test:corpus` builds dist/ first.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { repoRoot } from '../support/fixtures.js';
import { corpusFiles, corpusPath, traceFiles } from './corpus.js';

const bin = join(repoRoot, 'dist/cli/memscope.cjs');
let out = '';

interface Run {
  readonly args: readonly string[];
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

function runCli(args: readonly string[]): Promise<Run> {
  return new Promise((done) => {
    execFile(process.execPath, [bin, ...args], { cwd: out, maxBuffer: 1 << 28, encoding: 'utf8' }, (err, stdout, stderr) => {
      const status = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      done({ args, status, stdout, stderr });
    });
  });
}

/** Runs the argument lists two at a time (two cores), in order of the result. */
async function runAll(lists: readonly (readonly string[])[]): Promise<Run[]> {
  const results: Run[] = new Array(lists.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < lists.length) {
      const i = next++;
      results[i] = await runCli(lists[i]!);
    }
  };
  await Promise.all([worker(), worker()]);
  return results;
}

/** memscope's own lines on stderr after writing a file. */
const WROTE = /^memscope: (wrote .+ to |report written to )/;

/** A run that ended well: exit 0, nothing on stderr but memscope's lines about the files it wrote. */
function expectClean(r: Run): void {
  const stray = r.stderr.split('\n').filter((l) => l !== '' && !WROTE.test(l));
  expect({ args: r.args, status: r.status, stray }).toEqual({ args: r.args, status: 0, stray: [] });
}

beforeAll(() => {
  if (!existsSync(bin)) throw new Error('dist/cli/memscope.cjs is missing: run `npm run build` first (npm run test:corpus does)');
  out = mkdtempSync(join(tmpdir(), 'memscope-corpus-'));
});
afterAll(() => {
  if (out) rmSync(out, { recursive: true, force: true });
});

describe('every verb on every corpus snapshot', () => {
  corpusFiles.forEach((name, k) => {
    it(`${name}: summary, stats, trace, segments, memory, report, compare`, async () => {
      const file = corpusPath(name);
      const other = corpusPath(corpusFiles[(k + 1) % corpusFiles.length]!);
      const tag = `f${k}`;
      const runs = await runAll([
        ['summary', file],
        ['summary', file, '--json'],
        ['stats', file],
        ['trace', file, '--frames'],
        ['segments', file, '-o', `${tag}-segments.svg`],
        ['memory', file, '-o', `${tag}-memory.svg`],
        ['report', file, '-o', `${tag}-report.html`],
        ['compare', file, other],
      ]);
      for (const r of runs) expectClean(r);
      const [summary, json, stats, trace] = runs;
      expect(summary!.stdout).toMatch(/^CUDA memory snapshot: /);
      const figures = JSON.parse(json!.stdout) as { kind: string; warnings: unknown };
      expect(figures.kind).toBe('snapshot');
      expect(Array.isArray(figures.warnings)).toBe(true);
      expect(stats!.stdout.length).toBeGreaterThan(0);
      expect(trace!.stdout.length).toBeGreaterThan(0);
      for (const f of [`${tag}-segments.svg`, `${tag}-memory.svg`, `${tag}-report.html`]) expect(statSync(join(out, f)).size).toBeGreaterThan(0);
    });
  });
});

describe('the Kineto traces', () => {
  for (const file of traceFiles) {
    it(`${basename(file)}: summary and trace answer; stats refuses in one line`, async () => {
      const [summary, json, trace, stats] = await runAll([
        ['summary', file],
        ['summary', file, '--json'],
        ['trace', file, '--limit', '50'],
        ['stats', file],
      ]);
      for (const r of [summary!, json!, trace!]) expectClean(r);
      expect(JSON.parse(json!.stdout)).toHaveProperty('devices');
      expect(trace!.stdout.length).toBeGreaterThan(0);
      expect(stats!.status).toBe(1);
      expect(stats!.stderr).toMatch(
        new RegExp(`^memscope: .*${basename(file).replace(/\./g, '\\.')}: not a PyTorch memory snapshot: looks like a Kineto trace \\(JSON\\); \`memscope stats\` needs .*\\n$`),
      );
    });
  }
});
