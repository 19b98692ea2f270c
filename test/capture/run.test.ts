// `memscope run` as a process: what the capture holds when the program ends
// normally, throws, or is killed; --max-entries and --backend.
import { describe, it, expect, afterAll, vi } from 'vitest';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseCapture } from '../../src/capture/reader.js';
import { findLeaks } from '../../src/capture/leaks.js';
import { sourceCli } from '../support/child.js';

const root = resolve(import.meta.dirname, '../..');
const script = join(root, 'test/fixtures/scripts/train.mjs');
const work = mkdtempSync(join(tmpdir(), 'memscope-run-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));
// Up to two runs of a TFJS program per test, each bounded by its own 180 s.
vi.setConfig({ testTimeout: 360_000 });

const cli = sourceCli;

async function run(name: string, runArgs: string[], scriptArgs: string[], program = script) {
  const out = join(work, `${name}.ndjson`);
  const r = await cli(['run', '-q', '-o', out, ...runArgs, program, ...scriptArgs]);
  return { ...r, capture: () => parseCapture(readFileSync(out, 'utf8'), out) };
}

describe('memscope run', () => {
  it('a program killed with SIGKILL leaves a capture readable up to its last step', async () => {
    const r = await run('killed', [], ['--steps', '10', '--kill-after', '3']);
    expect(r.status).toBe(128 + 9);
    const cap = r.capture();
    expect(cap.truncated?.reason).toMatch(/no end record/);
    expect(cap.end).toBeNull();
    // Every step end flushes, so all three completed steps are there.
    expect(cap.steps.map((s) => s.step)).toEqual([1, 2, 3]);
    expect(cap.modules.map((m) => m.path)).toEqual(['mlp', 'mlp.hidden', 'mlp.norm', 'mlp.out']);
  });

  it('a program that throws: its exit code passes through and the capture records the error', async () => {
    const r = await run('throws', [], ['--steps', '10', '--throw-after', '2']);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/planted failure after step 2/);
    const cap = r.capture();
    expect(cap.truncated).toBeNull();
    expect(cap.end).toMatchObject({ exitCode: 1, error: 'Error: planted failure after step 2' });
    expect(cap.steps).toHaveLength(2);
  });

  it('--max-entries caps individual records; --backend picks the backend; script args pass through', async () => {
    const r = await run('capped', ['--max-entries', '50', '--backend', 'wasm'], ['--steps', '3']);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/final loss [\d.]+ on wasm/);
    const cap = r.capture();
    expect(cap.header).toMatchObject({ backend: 'wasm', maxEntries: 50, stacks: false });
    expect(cap.allocs.length).toBe(50);
    expect(new Set(cap.allocs.toArray().map((a) => a.device))).toEqual(new Set(['wasm']));
    expect(cap.end!.dropped).toBe(cap.end!.events - 50);
    expect(cap.steps).toHaveLength(3);
    // Step totals still count what was not recorded individually: weights, Adam state.
    // hidden kernel+bias, norm gamma+beta, out kernel+bias (float32).
    expect(cap.steps[2].live.wasm.Parameter).toBe((16 * 32 + 32 + (32 + 32) + (32 + 1)) * 4);
  });

  it('model.fit with callbacks on a functional model with a nested Sequential: modules found, leak located, clean run clean', async () => {
    const fit = join(root, 'test/fixtures/scripts/fit.mjs');
    const leakLine = readFileSync(fit, 'utf8').split('\n').findIndex((l) => l.includes('planted leak: kept forever')) + 1;
    const leaky = (await run('fit-leak', ['--stacks'], ['--leak'], fit)).capture();
    expect(leaky.modules.map((m) => m.path)).toEqual(['net', 'net.encode', 'net.block', 'net.block.inner', 'net.head']);
    expect(leaky.steps).toHaveLength(12); // 96 samples / batch 16 × 2 epochs
    const groups = findLeaks(leaky).groups;
    expect(groups).toHaveLength(1);
    expect(groups[0].kernel).toBe('Sigmoid');
    expect(groups[0].userFrame).toContain(`${fit}:${leakLine}:`);
    // Each batch's end left one 96×12 float32 tensor (4,608 B) alive, in steps 2..12 and after the last (13).
    expect(groups[0].perStep.map((r) => [r.step, r.count, r.bytes])).toEqual(Array.from({ length: 12 }, (_, k) => [k + 2, 1, 96 * 12 * 4]));
    expect(findLeaks((await run('fit-clean', ['--stacks'], [], fit)).capture()).groups).toEqual([]);
    // One tensor kept per epoch (6 epochs of 6 batches): the group grows once every six steps.
    const perEpoch = findLeaks((await run('fit-epoch-leak', ['--stacks'], ['--leak-per-epoch'], fit)).capture()).groups;
    const epochLine = readFileSync(fit, 'utf8').split('\n').findIndex((l) => l.includes('planted leak: one per epoch')) + 1;
    expect(perEpoch.map((g) => [g.kernel, g.userFrame?.includes(`${fit}:${epochLine}:`)])).toEqual([['Tanh', true]]);
    expect(perEpoch[0]!.count).toBe(6); // every epoch's, the last one's too
  });

  it('a custom loop (optimizer.minimize around model.apply) is found too', async () => {
    const fit = join(root, 'test/fixtures/scripts/fit.mjs');
    const leakLine = readFileSync(fit, 'utf8').split('\n').findIndex((l) => l.includes('planted leak in the custom loop')) + 1;
    const cap = (await run('custom', ['--stacks'], ['--leak', '--custom-loop'], fit)).capture();
    expect(cap.modules.map((m) => m.path)).toEqual(['net', 'net.encode', 'net.block', 'net.block.inner', 'net.head']);
    expect(cap.steps).toHaveLength(12);
    // encode 12×24+24, inner 24×24+24, head 24+1 float32 weights, all Parameter.
    expect(cap.steps[11].live.cpu.Parameter).toBe((12 * 24 + 24 + 24 * 24 + 24 + 24 + 1) * 4);
    const groups = findLeaks(cap).groups;
    expect(groups.map((g) => g.userFrame)).toEqual([expect.stringContaining(`${fit}:${leakLine}:`)]);
  });

  it('SIGTERM: finishes the capture and dies of it; a program that handles it keeps its own behaviour', async () => {
    const signal = join(root, 'test/fixtures/scripts/signal.mjs');
    const killed = await run('sigterm', [], [], signal);
    expect(killed.status).toBe(128 + 15);
    expect(killed.capture().end).toMatchObject({ events: 1, error: 'killed by SIGTERM' });
    const handled = await run('sigterm-own', [], ['own'], signal);
    expect(handled.status).toBe(3);
    expect(handled.stdout).toContain('graceful');
    const cap = handled.capture();
    expect(cap.end).toMatchObject({ events: 2, exitCode: 3, error: null });
    expect(cap.allocs.toArray().map((a) => a.bytes)).toEqual([40, 20]);
  });

  it('SIGTERM or SIGHUP sent to memscope alone reaches the program, which finishes its capture; memscope waits for it', async () => {
    const signal = join(root, 'test/fixtures/scripts/signal.mjs');
    for (const sig of ['SIGTERM', 'SIGHUP'] as const) {
      const out = join(work, `parent-${sig}.ndjson`);
      const child = spawn(process.execPath, ['--import', 'tsx', join(root, 'src/cli/main.ts'), 'run', '-q', '-o', out, signal, 'wait'], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      await new Promise<void>((ready) => child.stdout!.on('data', (d: Buffer) => (stdout += d) && stdout.includes('ready') && ready()));
      const exited = new Promise<number | null>((done) => child.on('exit', (code) => done(code)));
      child.kill(sig);
      // Before, memscope died of the signal at once and left the program running, its capture unfinished.
      expect(await exited, sig).toBe(128 + (sig === 'SIGTERM' ? 15 : 1));
      expect(parseCapture(readFileSync(out, 'utf8'), out).end, sig).toMatchObject({ error: `killed by ${sig}` });
    }
  });

  it('a capture path that cannot be written is one line before the program starts', async () => {
    for (const [output, problem] of [[join(work, 'no-such-dir', 'c.ndjson'), 'no such directory'], [work, 'is a directory']] as const) {
      const r = await cli(['run', '-q', '-o', output, script]);
      expect(r.status).toBe(1);
      expect(r.stderr).toBe(`memscope: ${output}: cannot write it: ${problem}\n`);
    }
  });

  it('bad arguments are one clear line', async () => {
    const missing = await cli(['run', join(work, 'nope.js')]);
    expect(missing.status).toBe(1); // bad input
    expect(missing.stderr.trim()).toBe(`memscope: ${join(work, 'nope.js')}: no such file`);
    const r = await run('bad', ['--max-entries', 'lots'], []);
    expect(r.status).toBe(2); // usage
    expect(r.stderr).toMatch(/--max-entries must be a non-negative integer, got "lots"/);
    const backend = await run('bad-backend', ['--backend', 'nosuch'], []);
    expect(backend.status).toBe(2);
    expect(backend.stderr.trim()).toBe('memscope: --backend nosuch: the program cannot load @tensorflow/tfjs-backend-nosuch');
    // The program never ran: no capture is left, and (without -q) none is said to be written.
    expect(existsSync(join(work, 'bad-backend.ndjson'))).toBe(false);
    const loud = await cli(['run', '-o', join(work, 'loud bad.ndjson'), '--backend', 'nosuch', script]);
    expect(loud.stderr.trim()).toBe('memscope: --backend nosuch: the program cannot load @tensorflow/tfjs-backend-nosuch');
    // A browser backend loads in Node but cannot start: one line naming the option and where it runs.
    const gpu = await run('gpu-backend', ['--backend', 'webgpu'], []);
    expect(gpu.status).toBe(2);
    expect(gpu.stderr.trim()).toMatch(/^memscope: --backend webgpu: TFJS could not initialise the backend.* \(webgpu runs in a browser: capture the page with memscope\/browser's startCapture\)$/);
    expect(existsSync(join(work, 'gpu-backend.ndjson'))).toBe(false);
  });

  it('the "next:" hint names a capture path with spaces as one shell word', async () => {
    const out = join(work, "my run's capture.ndjson");
    const r = await cli(['run', '-o', out, join(root, 'test/fixtures/scripts/step-marks.mjs'), '--clean']);
    expect(r.status, r.stderr).toBe(0);
    const quoted = `'${out.replace(/'/g, "'\\''")}'`;
    expect(r.stderr).toContain(`next: memscope report ${quoted} -o report.html · memscope leaks ${quoted}`);
  });
});
