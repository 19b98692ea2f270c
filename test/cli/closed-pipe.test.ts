// A reader that stops early (`memscope leaks c --json | head`) closes the pipe under a verb still
// writing: every verb then ends quietly, exit 0, never with an EPIPE stack trace.
import { describe, it, expect, afterAll } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fixture, repoRoot } from '../support/fixtures.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-closed-pipe-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A capture of `steps` inference steps, each keeping one 128-byte output: a leak with a row per step in `--json`. */
function leakyCapture(steps: number): string {
  const lines: unknown[] = [
    { format: 'memscope-capture', version: 1, clock: 'ms', created: '2026-01-01T00:00:00.000Z', argv: ['serve.mjs'], backend: null, stacks: false, maxEntries: null },
    ['s', 1, 'Activation'],
    ['s', 2, 'forward'],
    ['s', 3, 'cpu'],
    ['s', 4, 'predict'],
  ];
  for (let k = 0; k < steps; k++) {
    lines.push(['a', 2 * k + 1, k, 3, 128, 1, 0, 2, 0, 0, 0]);
    lines.push(['m', 2 * k + 2, 4]);
  }
  lines.push(['e', 2 * steps + 1, { events: steps, dropped: 0, exitCode: 0, error: null }]);
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

/** Runs the CLI from source and closes its stdout after the first piece it writes. */
function readFirstPieceOnly(args: readonly string[]): Promise<{ status: number | null; stderr: string; got: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(repoRoot, 'src/cli/main.ts'), ...args], { cwd: repoRoot, stdio: 'pipe', timeout: 120_000 });
    let stderr = '';
    let got = 0;
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.stdout.once('data', (d: Buffer) => {
      got = d.length;
      child.stdout.destroy();
    });
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stderr, got }));
  });
}

describe('a closed stdout pipe', () => {
  it.each([
    ['leaks --json', (file: string) => ['leaks', file, '--json']],
    ['trace', () => ['trace', fixture('torch/transformer_fullstep_trace.pickle')]],
  ])('%s ends quietly with exit 0', async (_name, args) => {
    const file = join(work, 'leaky.ndjson');
    writeFileSync(file, leakyCapture(20_000));
    const r = await readFirstPieceOnly(args(file));
    expect(r.got).toBeGreaterThan(0);
    expect(r.stderr).not.toMatch(/EPIPE|at \w|Error/);
    expect(r.status).toBe(0);
  });
});
