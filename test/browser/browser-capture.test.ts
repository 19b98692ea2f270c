// memscope/browser's capture of a TFJS program in headless Chromium, read by the Node CLI:
// `memscope leaks` finds in the page's capture what it finds in a `memscope run` of the same
// program in Node (pages/browser-leaky-loop.mjs), at the same line, and `memscope report`
// renders it.
import type { Browser } from 'playwright-core';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium } from '../support/browser.js';
import { sourceCli } from '../support/child.js';
import { repoRoot } from '../support/fixtures.js';
import { embeddedDataJson } from '../../src/viewer/html.js';
import { openServedPage } from './pages/browser-server.js';

const ENTRY = `
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';
import * as tfl from '@tensorflow/tfjs-layers';
import { startCapture, step } from './src/browser/index.ts';
Object.assign(globalThis, { tf, tfl, memscope: { startCapture, step } });
`;
// Served under node_modules/, as a dev server (Vite) serves a page's dependencies: the capture
// folds those frames as library code, like installed packages in Node.
const BUNDLE = '/node_modules/.vite/deps/memscope-page.js';
const PROGRAM = '/test/browser/pages/browser-leaky-loop.mjs';

const work = mkdtempSync(join(tmpdir(), 'memscope-browser-capture-'));

interface LeakJson {
  steps: number;
  stepKind: string;
  note: string | null;
  leaks: { kernel: string; layer: string; device: string; categories: string[]; count: number; bytes: number; perStep: unknown[]; liveAtStepEnd: number[]; site: string; stack: string[] }[];
}

describe('memscope/browser capture, read by the Node CLI', () => {
  let browser: Browser;
  let bundle: string;
  beforeAll(async () => {
    bundle = await bundlePageScript(ENTRY, 'browser-capture-page.ts');
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** Runs the program in a fresh page under startCapture and writes the capture to a file. */
  async function captureInPage(name: string, clean: boolean): Promise<string> {
    const { page, errors } = await openServedPage(browser, { scripts: { [BUNDLE]: bundle }, allow: ['/test/browser/pages/'] });
    try {
      await page.addScriptTag({ url: BUNDLE });
      // A string, not a function: vitest rewrites `import()` inside test functions.
      const { text, blob }: { text: string; blob: string } = await page.evaluate(`(async () => {
        await tf.setBackend('cpu');
        const { train } = await import(${JSON.stringify(PROGRAM)});
        const capture = memscope.startCapture({ tf: [tf, tfl], stacks: true });
        await train(tf, tfl, { clean: ${clean} });
        const text = capture.stop();
        return { text, blob: await capture.blob().text() };
      })()`);
      expect(errors).toEqual([]);
      // The Blob (what download() saves) holds the text stop() returns.
      expect(blob).toBe(text);
      expect(text.split('\n').length).toBeGreaterThan(50);
      const file = join(work, `${name}.ndjson`);
      writeFileSync(file, text);
      return file;
    } finally {
      await page.close();
    }
  }

  async function leaksOf(file: string): Promise<{ status: number | null; json: LeakJson }> {
    const r = await sourceCli(['leaks', '--json', file]);
    expect(r.stderr).toBe('');
    return { status: r.status, json: JSON.parse(r.stdout) as LeakJson };
  }

  it('a kept prediction per training step: the same leak as `memscope run` finds in Node, at the same line of the program', async () => {
    const nodeCapture = join(work, 'node.ndjson');
    const run = await sourceCli(['run', '-q', '--stacks', '-o', nodeCapture, join(repoRoot, 'test/browser/pages/browser-leaky-loop-node.mjs')]);
    expect(run.status, run.stderr).toBe(0);
    const node = await leaksOf(nodeCapture);
    const page = await leaksOf(await captureInPage('page', false));

    expect(node.status).toBe(3);
    expect(page.status).toBe(3);
    expect(node.json.leaks).toHaveLength(1);
    expect(page.json.leaks).toHaveLength(1);
    const [n] = node.json.leaks;
    const [p] = page.json.leaks;
    // Five trainOnBatch steps and five top-level predicts: ten step ends.
    expect({ steps: page.json.steps, stepKind: page.json.stepKind }).toEqual({ steps: 10, stepKind: 'mixed' });
    for (const key of ['kernel', 'layer', 'device', 'categories', 'count', 'bytes', 'perStep', 'liveAtStepEnd'] as const) expect(p[key], key).toEqual(n[key]);
    // Each kept prediction is a 16×2 float32 tensor, the last step's one included.
    expect(p.bytes).toBe(5 * 16 * 2 * 4);
    const line = readFileSync(join(repoRoot, PROGRAM.slice(1)), 'utf8').split('\n').findIndex((l) => l.includes('model.predict(xs)')) + 1;
    expect(line).toBeGreaterThan(0);
    expect(n.site).toMatch(new RegExp(`/test/browser/pages/browser-leaky-loop\\.mjs:${line}:\\d+$`));
    expect(p.site).toBe(`http://localhost${PROGRAM}:${n.site.split(':').slice(-2).join(':')}`);
    // The page's bundle (TFJS and memscope) is folded like Node's installed packages.
    expect(p.stack[0]).toMatch(/^\[\d+ frames in \.vite(, node)?\]$/);
    expect(p.stack[1]).toBe(`train (${p.site})`);
  });

  it('memscope and TFJS in a vendor chunk of their own, the capture started by the program: the chunk is folded, the leak is at the program\'s line', async () => {
    const vendor = '/assets/vendor-3f9a.js';
    const { page, errors } = await openServedPage(browser, { scripts: { [vendor]: bundle }, allow: ['/test/browser/pages/'] });
    const warnings: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'warning') warnings.push(m.text());
    });
    let text: string;
    try {
      await page.addScriptTag({ url: vendor });
      text = await page.evaluate(`(async () => {
        await tf.setBackend('cpu');
        const { captureTraining } = await import('/test/browser/pages/browser-vendor-program.mjs');
        return captureTraining(tf, tfl, memscope);
      })()`);
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
    expect(warnings).toEqual([]);
    const file = join(work, 'vendor.ndjson');
    writeFileSync(file, text);
    const { status, json } = await leaksOf(file);
    expect(status).toBe(3);
    const [leak] = json.leaks;
    const line = readFileSync(join(repoRoot, PROGRAM.slice(1)), 'utf8').split('\n').findIndex((l) => l.includes('model.predict(xs)')) + 1;
    expect(leak!.site).toMatch(new RegExp(`^http://localhost${PROGRAM.replace(/\./g, '\\.')}:${line}:\\d+$`));
    expect(leak!.stack[0]).toMatch(/^\[\d+ frames in memscope/);
  });

  it('the same program disposing its predictions: no leak; `memscope report` renders the page\'s capture', async () => {
    const clean = await leaksOf(await captureInPage('clean', true));
    expect(clean.status).toBe(0);
    expect(clean.json).toMatchObject({ steps: 10, stepKind: 'mixed', note: null, leaks: [] });

    const leaky = join(work, 'page.ndjson');
    const html = join(work, 'page.html');
    const r = await sourceCli(['report', '-o', html, leaky]);
    expect(r.status, r.stderr).toBe(0);
    const page = readFileSync(html, 'utf8');
    const data = JSON.parse(embeddedDataJson(page)!);
    expect(data.leaks).toHaveLength(1);
    expect(data.leaks[0].userFrame).toContain(`http://localhost${PROGRAM}:`);
    expect(data.modules.map((m: { path: string }) => m.path)).toContain('sequential_1');
    expect(data.steps.length).toBeGreaterThanOrEqual(5);
  });
});
