// `memscope viewer` writes the empty viewer; `memscope view FILE` writes the report and opens it
// with the program MEMSCOPE_OPENER names (here a stand-in that records what it was given, so no
// browser is ever started), never waiting on it and never failing when there is none.
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { openerCommand } from '../../src/cli/commands/view.js';
import { fixture, repoRoot } from '../support/fixtures.js';
import { runNode, type ChildOutcome } from '../support/child.js';

vi.setConfig({ testTimeout: 180_000 });

const bin = path.join(repoRoot, 'dist/cli/memscope.cjs');
const work = mkdtempSync(path.join(tmpdir(), 'memscope-view-'));
const snapshot = fixture('torch/small_3seg.pickle');

/** A stand-in browser: appends the arguments it was started with to `opened.txt`. */
const fakeOpener = path.join(work, 'fake-opener.mjs');
writeFileSync(fakeOpener, "import { appendFileSync } from 'node:fs';\nappendFileSync(new URL('./opened.txt', import.meta.url), JSON.stringify(process.argv.slice(2)) + '\\n');\n");
const opened = path.join(work, 'opened.txt');

function memscope(args: string[], env: Record<string, string> = {}): Promise<ChildOutcome> {
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run \`npm run build\` first (npm test does)`);
  const base: NodeJS.ProcessEnv = { ...process.env, MEMSCOPE_COMPILE_CACHE: 'off', NO_COLOR: '1' };
  delete base['MEMSCOPE_OPENER'];
  return runNode([bin, ...args], { cwd: work, env: { ...base, ...env } });
}

async function openedWith(): Promise<string[][]> {
  await vi.waitFor(() => expect(existsSync(opened)).toBe(true), { timeout: 30_000, interval: 100 });
  return readFileSync(opened, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as string[]);
}

describe('memscope viewer', () => {
  it('writes the viewer without data: the page shell, the app and a drop zone saying what it reads', async () => {
    const r = await memscope(['viewer', '-o', 'empty.html']);
    expect(r.status).toBe(0);
    expect(r.stderr).toMatch(/^memscope: viewer written to empty\.html \([\d.]+ KiB\); open it in a browser and drop a file on it: PyTorch memory snapshots/);
    const html = readFileSync(path.join(work, 'empty.html'), 'utf8');
    expect(html).toContain('<title>memscope viewer</title>');
    expect(html).not.toContain('id="memscope-data"');
    expect(html).toContain('id="drop-zone"');
    expect(html).toContain('Kineto profiler traces');
    expect(html).toMatch(/Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline';/);
    // The app with its readers is inline: one <script>, which holds the pickle reader's refusals.
    expect(html.match(/<script>/g)).toHaveLength(1);
    expect(html).toContain('runs past the end of the file');
  });

  it('-o defaults to memscope.html', async () => {
    const r = await memscope(['viewer']);
    expect(r.status).toBe(0);
    expect(existsSync(path.join(work, 'memscope.html'))).toBe(true);
  });
});

describe('memscope view', () => {
  it('writes the same page as memscope report and starts the opener on it, by absolute path', async () => {
    const r = await memscope(['view', snapshot, '-o', 'viewed.html'], { MEMSCOPE_OPENER: `${process.execPath} ${fakeOpener}` });
    expect(r.status).toBe(0);
    const out = path.join(work, 'viewed.html');
    expect(r.stderr.trim()).toMatch(new RegExp(`^memscope: report written to ${out.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\([\\d.]+ KiB\\); opening it with `));
    expect(await openedWith()).toEqual([[out]]);
    const report = await memscope(['report', snapshot, '-o', 'reported.html']);
    expect(report.status).toBe(0);
    expect(readFileSync(out, 'utf8')).toBe(readFileSync(path.join(work, 'reported.html'), 'utf8'));
  });

  it('does not wait for an opener that stays', async () => {
    const started = Date.now();
    const r = await memscope(['view', snapshot, '-o', 'stays.html'], { MEMSCOPE_OPENER: `${process.execPath} -e setTimeout(()=>{},30000)` });
    expect(r.status).toBe(0);
    expect(Date.now() - started).toBeLessThan(25_000);
    expect(r.stderr).toContain('opening it with');
  });

  it('an opener that does not exist: the report is written, the path printed with how to open it, exit 0', async () => {
    const r = await memscope(['view', snapshot, '-o', 'nobrowser.html'], { MEMSCOPE_OPENER: path.join(work, 'no-such-browser') });
    expect(r.status).toBe(0);
    const out = path.join(work, 'nobrowser.html');
    expect(r.stderr.trim().split('\n')).toEqual([`memscope: report written to ${out} (${r.stderr.match(/\(([\d.]+ KiB)\)/)![1]}) (${path.join(work, 'no-such-browser')} could not be started): open file://${out} in a browser (or drop the file on one)`]);
    expect(existsSync(out)).toBe(true);
  });

  it('--no-open and MEMSCOPE_OPENER=none print the path and start nothing', async () => {
    for (const [args, env] of [[['--no-open'], {}], [[], { MEMSCOPE_OPENER: 'none' }]] as const) {
      const r = await memscope(['view', snapshot, '-o', 'quiet.html', ...args], { ...env });
      expect(r.status).toBe(0);
      expect(r.stderr).toMatch(/: open file:\/\/.*quiet\.html in a browser/);
      expect(r.stderr).not.toContain('opening it with');
    }
  });

  it('a bad input is one line, exit 1, and nothing is written or opened', async () => {
    writeFileSync(path.join(work, 'notes.txt'), 'hello');
    const r = await memscope(['view', 'notes.txt', '-o', 'bad.html'], { MEMSCOPE_OPENER: `${process.execPath} ${path.join(work, 'opener-never.mjs')}` });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('memscope: notes.txt: not a memscope capture, PyTorch memory snapshot or Kineto trace: looks like text ("hello")\n');
    expect(existsSync(path.join(work, 'bad.html'))).toBe(false);
  });

  it('the opener per platform, and none on a Linux without a display', () => {
    expect(openerCommand({}, 'darwin')).toEqual(['open']);
    expect(openerCommand({}, 'win32')).toEqual(['cmd', '/c', 'start', '""']);
    expect(openerCommand({ DISPLAY: ':0' }, 'linux')).toEqual(['xdg-open']);
    expect(openerCommand({ WAYLAND_DISPLAY: 'wayland-0' }, 'freebsd')).toEqual(['xdg-open']);
    expect(openerCommand({}, 'linux')).toBeNull();
    expect(openerCommand({ MEMSCOPE_OPENER: 'firefox --new-tab' }, 'linux')).toEqual(['firefox', '--new-tab']);
    expect(openerCommand({ MEMSCOPE_OPENER: 'none', DISPLAY: ':0' }, 'linux')).toBeNull();
  });
});
