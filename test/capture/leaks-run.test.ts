// `memscope run` + `memscope leaks` on real TFJS programs: a correct `fit` is
// not a leak; inference loops (CommonJS, async ES module) and step()-marked
// loops that keep their outputs are, located at the program's own line.
import { describe, it, expect, afterAll, vi } from 'vitest';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { repoRoot as root } from '../support/fixtures.js';
import { sourceCli } from '../support/child.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-leaks-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
// Up to four runs of a TFJS program per test, each bounded by its own 180 s.
vi.setConfig({ testTimeout: 720_000 });

const cli = sourceCli;

/** Runs a fixture script under `memscope run --stacks` and returns the capture's path. */
async function capture(name: string, script: string, scriptArgs: string[] = []): Promise<string> {
  const out = join(work, `${name}.ndjson`);
  const r = await cli(['run', '-q', '--stacks', '-o', out, script, ...scriptArgs]);
  expect(r.status, r.stderr).toBe(0);
  return out;
}

const scripts = join(root, 'test/fixtures/scripts');
/** `path:line:` of the first line of `file` containing `marker`. */
function lineOf(file: string, marker: string): string {
  const line = readFileSync(file, 'utf8').split('\n').findIndex((l) => l.includes(marker)) + 1;
  expect(line).toBeGreaterThan(0);
  return `${file}:${line}:`;
}

describe('memscope leaks on real programs', () => {
  it('plain model.fit for 4 epochs: no leak, exit 0 (fit\'s own per-epoch bookkeeping is released by the end)', async () => {
    const cap = await capture('fit', join(scripts, 'plain-fit.mjs'));
    const r = await cli(['leaks', cap]);
    expect(r.stdout).toMatch(/^No leaks: .* 4 steps/);
    expect(r.status).toBe(0);
  });

  it('kept.push(model.predict(xs)) in a loop: one leak whose first line is the script\'s own line', async () => {
    const script = join(scripts, 'predict-leak.cjs');
    const cap = await capture('predict', script);
    const r = await cli(['leaks', '--frames', '60', cap]);
    expect(r.status).toBe(3);
    const lines = r.stdout.split('\n');
    expect(lines[0]).toMatch(/^1 leak over 6 inference steps: 768 B still alive when the program ended\.$/);
    const at = lines.find((l) => l.includes('allocated at'))!;
    expect(at.trim()).toMatch(new RegExp(`^allocated at ${escape(lineOf(script, 'model.predict(xs)'))}\\d+$`));
    expect(r.stdout).not.toMatch(/unknown site|record with --stacks/);
    // The stack below names the same line, after the folded library frames.
    const stack = lines.slice(lines.findIndex((l) => l.includes('stack:')) + 1).filter((l) => l.trim());
    expect(stack[0]).toMatch(/^\s+\[\d+ frames in .*@tensorflow\/tfjs-layers/);
    expect(stack[1]).toContain(lineOf(script, 'model.predict(xs)'));

    const clean = await cli(['leaks', await capture('predict-clean', script, ['--clean'])]);
    expect(clean.status).toBe(0);
    expect(clean.stdout).toMatch(/^No leaks: .* 6 inference steps/);
  });

  it('an async inference loop in an ES module: run --json reports the leak at the awaited loop\'s line', async () => {
    const script = join(scripts, 'predict-leak-async.mjs');
    const out = join(work, 'async.ndjson');
    const r = await cli(['run', '--json', '--stacks', '-o', out, script]);
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('answered 6'); // the program's stdout, moved aside for the JSON
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ exitCode: 0, capture: out, steps: 6, stepKind: 'inference', note: null });
    expect(json.leaks).toHaveLength(1);
    expect(json.leaks[0].site).toMatch(new RegExp(`^${escape(lineOf(script, 'model.predict(x)'))}\\d+$`));
    expect(json.leaks[0].perStep.map((s: { step: number }) => s.step)).toEqual([1, 2, 3, 4, 5, 6]);
    const clean = JSON.parse((await cli(['run', '--json', '--stacks', '-o', join(work, 'async-clean.ndjson'), script, '--clean'])).stdout);
    expect(clean.leaks).toEqual([]);
  });

  // The script imports `step` from 'memscope/tfjs', which resolves to this package's dist/ (npm test builds it first).
  it('step() marks the steps of a program with no model; leaks --json agrees with the text', async () => {
    const script = join(scripts, 'step-marks.mjs');
    const cap = await capture('steps', script);
    const r = await cli(['leaks', '--json', cap]);
    expect(r.status).toBe(3);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ steps: 5, stepKind: 'marked' });
    expect(json.leaks.map((g: { site: string; kernel: string; count: number }) => [g.kernel, g.count])).toEqual([['Square', 5]]);
    expect(json.leaks[0].site).toContain(lineOf(script, 'tf.square(base)'));
    expect((await cli(['leaks', await capture('steps-clean', script, ['--clean'])])).status).toBe(0);
    // Gzipped (as a capture is kept or sent), the same leaks.
    writeFileSync(`${cap}.gz`, gzipSync(readFileSync(cap)));
    const gz = await cli(['leaks', '--json', `${cap}.gz`]);
    expect(gz.status, gz.stderr).toBe(3);
    expect({ ...JSON.parse(gz.stdout), capture: cap }).toEqual(json);
    // Written gzipped by `run -o *.gz`: a gzip file, with the same leaks.
    const written = join(work, 'steps-written.ndjson.gz');
    const run = await cli(['run', '-q', '--stacks', '-o', written, script]);
    expect(run.status, run.stderr).toBe(0);
    expect([...readFileSync(written).subarray(0, 2)]).toEqual([0x1f, 0x8b]);
    const fromRun = await cli(['leaks', '--json', written]);
    expect(fromRun.status, fromRun.stderr).toBe(3);
    expect(JSON.parse(fromRun.stdout).leaks.map((g: { kernel: string; count: number }) => [g.kernel, g.count])).toEqual([['Square', 5]]);
  });

  it('a custom loop of tf.variableGrads and optimizer.applyGradients: training steps, the leak at its line, Adam state owned', async () => {
    const script = join(scripts, 'apply-gradients-leak.mjs');
    const r = await cli(['leaks', '--json', await capture('apply-gradients', script)]);
    expect(r.status, r.stderr).toBe(3);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ steps: 8, stepKind: 'training', note: null, coverage: null });
    expect(json.leaks.map((g: { kernel: string; count: number; bytes: number }) => [g.kernel, g.count, g.bytes])).toEqual([['Multiply', 8, 32]]);
    expect(json.leaks[0].site).toContain(lineOf(script, 'tf.mul(value, 1)'));
    expect((await cli(['leaks', await capture('apply-gradients-clean', script, ['--clean'])])).status).toBe(0);
  });

  it('a capture past its --max-entries says the verdict covers only what it recorded', async () => {
    const script = join(scripts, 'apply-gradients-leak.mjs');
    const out = join(work, 'capped.ndjson');
    expect((await cli(['run', '-q', '--max-entries', '40', '-o', out, script])).status).toBe(0);
    const text = await cli(['leaks', out]);
    expect(text.stdout).toMatch(/^Partial capture: [\d,]+ allocations past the capture's --max-entries 40 were not recorded: leaks made after the first recorded ones cannot be seen; of its 8 step ends, .*\(record again with a higher --max-entries, or none\)\.$/m);
    const json = JSON.parse((await cli(['leaks', '--json', out])).stdout);
    expect(json.coverage).toMatch(/past the capture's --max-entries 40/);
    expect(JSON.parse((await cli(['leaks', '--json', await capture('uncapped', script)])).stdout).coverage).toBeNull();
  });

  it('GraphModel.executeAsync calls are inference steps (a stand-in tfjs-converter package in a temporary app)', async () => {
    // tfjs-converter is not a dependency here: a minimal package with its export's name and
    // methods stands in for it, loaded from the app's node_modules as the real one would be.
    const app = join(work, 'graph-app');
    const modules = join(app, 'node_modules/@tensorflow');
    mkdirSync(join(modules, 'tfjs-converter'), { recursive: true });
    for (const pkg of ['tfjs-core', 'tfjs-backend-cpu']) symlinkSync(join(root, 'node_modules/@tensorflow', pkg), join(modules, pkg), 'dir');
    writeFileSync(join(modules, 'tfjs-converter/package.json'), JSON.stringify({ name: '@tensorflow/tfjs-converter', version: '0.0.0', main: 'index.js' }));
    writeFileSync(
      join(modules, 'tfjs-converter/index.js'),
      [
        "const tf = require('@tensorflow/tfjs-core');",
        'class GraphModel {',
        '  constructor() { this.w = tf.ones([4, 3]); }',
        '  predict(x) { return this.execute(x); }',
        '  execute(x) { return tf.matMul(x, this.w); }',
        '  async executeAsync(x) { await null; return this.execute(x); }',
        '}',
        'module.exports = { GraphModel };',
      ].join('\n'),
    );
    const script = join(app, 'serve.cjs');
    writeFileSync(
      script,
      [
        "const tf = require('@tensorflow/tfjs-core');",
        "require('@tensorflow/tfjs-backend-cpu');",
        "const { GraphModel } = require('@tensorflow/tfjs-converter');",
        'async function main() {',
        "  await tf.setBackend('cpu');",
        '  const model = new GraphModel();',
        '  const x = tf.ones([2, 4]);',
        '  const kept = [];',
        '  for (let i = 0; i < 5; i++) kept.push(await model.executeAsync(x)); // kept answers',
        '}',
        'main();',
      ].join('\n'),
    );
    const json = JSON.parse((await cli(['run', '--json', '--stacks', '-o', join(work, 'graph.ndjson'), script])).stdout);
    expect(json).toMatchObject({ exitCode: 0, steps: 5, stepKind: 'inference' });
    expect(json.leaks.map((g: { kernel: string; count: number }) => [g.kernel, g.count])).toEqual([['BatchMatMul', 5]]);
    expect(json.leaks[0].site).toContain(lineOf(script, 'kept answers'));
  });

  it('a bad --frames value is one line naming it', async () => {
    const cap = await capture('frames', join(scripts, 'step-marks.mjs'), ['--clean']);
    const r = await cli(['leaks', '--frames', 'abc', cap]);
    expect(r.status).toBe(2); // usage
    expect(r.stderr.trim()).toBe('memscope: --frames must be a non-negative integer, got "abc" (see memscope leaks --help)');
  });
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
