// The flame graphs in the report page (a snapshot's `memory` and `segments` views): the columns
// the page embeds, click-to-zoom and reset, and search with its total, checked against the raw
// weighted stacks `memscope memory --json` prints.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { buildFlameTree, type FlameNode } from '../../src/render/flamegraph-svg.js';
import { flameGraphData, type FlameGraphData } from '../../src/render/flamegraph-data.js';
import { prng } from '../support/prng.js';
import { humanBytes } from '../../src/core/units.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { blockFlameStacks } from '../../src/torch/snapshot-flamegraph.js';
import { snapshotToReport, traceToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import type { MemorySnapshot } from '../../src/torch/snapshot.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage } from '../support/report-page.js';
import { fixture, repoRoot } from '../support/fixtures.js';

const artifacts = resolve(repoRoot, 'test-artifacts');
const work = mkdtempSync(join(tmpdir(), 'memscope-flame-'));
let browser: Browser;
let app: string;

async function open(data: ReportData, name: string): Promise<{ page: Page; errors: string[] }> {
  const html = join(work, `${name}.html`);
  writeFileSync(html, renderReportHtml(data, app));
  return openReportPage(browser, html, { width: 1280, height: 1000 });
}

beforeAll(async () => {
  mkdirSync(artifacts, { recursive: true });
  app = await viewerBundle();
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  rmSync(work, { recursive: true, force: true });
});

describe('flame graph data', () => {
  it('flattens the merged tree in pre-order, siblings by name, with each node\u2019s left edge', () => {
    const tree = [
      { frames: ['d'], weight: 5 },
      { frames: ['a', 'c'], weight: 2 },
      { frames: ['a', 'b'], weight: 3 },
    ];
    const g = flameGraphData(tree, 'T', 'bytes');
    expect(g.name.map((i) => g.names[i])).toEqual(['all', 'a', 'b', 'c', 'd']);
    expect(g.depth).toEqual([0, 1, 2, 2, 1]);
    expect(g.value).toEqual([10, 5, 3, 2, 5]);
    expect(g.offset).toEqual([0, 0, 0, 3, 5]);
    expect(g.dropped).toBe(0);
    // Under a fifth of the root: c (2 of 10) is left out, its weight stays in a.
    const pruned = flameGraphData(tree, 'T', 'bytes', { minFraction: 0.25 });
    expect(pruned.name.map((i) => pruned.names[i])).toEqual(['all', 'a', 'b', 'd']);
    expect(pruned.offset).toEqual([0, 0, 0, 5]);
    expect(pruned.dropped).toBe(1);
  });
});

/** The flattening the columns must equal, over buildFlameTree's tree of objects: pre-order, siblings by name. */
function flattenTree(root: FlameNode, minFraction: number): Omit<FlameGraphData, 'title' | 'unit'> {
  const names: string[] = [];
  const out = { names, name: [] as number[], depth: [] as number[], value: [] as number[], offset: [] as number[], dropped: 0 };
  const visit = (node: FlameNode, depth: number, offset: number): void => {
    if (!names.includes(node.name)) names.push(node.name);
    out.name.push(names.indexOf(node.name));
    out.depth.push(depth);
    out.value.push(node.value);
    out.offset.push(offset);
    let x = offset;
    for (const c of [...node.children.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      if (c.value >= root.value * minFraction && c.value > 0) visit(c, depth + 1, x);
      else out.dropped++;
      x += c.value;
    }
  };
  visit(root, 0, 0);
  return out;
}

describe('flame graph data from many stacks', () => {
  it('equals the flattened tree of objects, for random stacks over shared and repeated frames, at any cut', () => {
    const rand = prng(5);
    const frames = Array.from({ length: 40 }, (_, i) => `f${i % 7}:${i}`);
    for (let round = 0; round < 20; round++) {
      const stacks = Array.from({ length: 300 }, () => ({
        frames: Array.from({ length: 1 + rand.int(8) }, () => rand.pick(frames)),
        weight: rand.next() < 0.05 ? 0 : 1 + rand.int(1000),
      }));
      for (const minFraction of [0, 1e-6, 0.001, 0.02]) {
        const g = flameGraphData(stacks, 'T', 'bytes', { rootLabel: 'root', minFraction });
        const { title, unit, ...columns } = g;
        expect([title, unit]).toEqual(['T', 'bytes']);
        expect(columns).toEqual(flattenTree(buildFlameTree(stacks, 'root'), minFraction));
      }
    }
  });

  it('the snapshot views\u2019 graphs equal the tree of objects on a real snapshot', async () => {
    const f = await openMemoryFile(fixture('torch/transformer_fullstep_trace.pickle'));
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const d = snapshotToReport(f.snapshot, 'x.pickle', DEFAULT_CAPS);
    for (const [k, bySegment] of [[0, false], [1, true]] as const) {
      const stacks = blockFlameStacks(f.snapshot, bySegment);
      const { title: _t, unit: _u, ...columns } = d.flames![k]!;
      expect(columns.name.length).toBeGreaterThan(100);
      expect(columns).toEqual(flattenTree(buildFlameTree(stacks, 'all'), 1e-6));
    }
  });
});

describe('flame graphs in the page', () => {
  let snap: MemorySnapshot;
  beforeAll(async () => {
    const f = await openMemoryFile(fixture('torch/transformer_fullstep_trace.pickle'));
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    snap = f.snapshot;
  });

  it('click zooms to a frame, reset zooms out, search highlights and totals what the stacks hold', async () => {
    const d = snapshotToReport(snap, 'x.pickle', DEFAULT_CAPS);
    expect(d.flames!.map((g) => g.title.split(':')[0])).toEqual(['Memory', 'Segments']);
    const { page, errors } = await open(d, 'flame-snapshot');
    await page.locator('#flames').scrollIntoViewIfNeeded();
    expect(await page.locator('#flames').isVisible()).toBe(true);

    const frame = 'optimizers.py:82:step';
    const at = await page.evaluate((n) => window.memscopeFlame!.locate(n), frame);
    expect(at).not.toBeNull();
    await page.mouse.click(at!.x, at!.y);
    const g = d.flames![0]!;
    const zoomed = await page.evaluate(() => window.memscopeFlame!.zoomed());
    expect(g.names[g.name[zoomed]!]).toBe(frame);
    expect(await page.locator('#flame-status').innerText()).toContain(`Zoomed to ${frame}`);
    // Zoomed, the frame spans the whole width: its centre is the canvas's.
    const box = (await page.locator('#flame').boundingBox())!;
    const after = await page.evaluate((n) => window.memscopeFlame!.locate(n), frame);
    expect(Math.abs(after!.x - (box.x + box.width / 2))).toBeLessThan(2);
    await page.screenshot({ path: join(artifacts, 'flame-zoomed.png') });
    await page.locator('#flame-reset').click();
    expect(await page.evaluate(() => window.memscopeFlame!.zoomed())).toBe(0);

    // Search: frames containing the text, their total counted once per stack, as the raw stacks give.
    const query = 'optimizers.py';
    const stacks = blockFlameStacks(snap, false);
    const expected = stacks.filter((s) => s.weight > 0 && s.frames.some((f) => f.toLowerCase().includes(query))).reduce((sum, s) => sum + s.weight, 0);
    expect(expected).toBeGreaterThan(0);
    const matching = g.name.filter((i) => g.names[i]!.toLowerCase().includes(query)).length;
    // Typed while zoomed: the status line counts at once, beside the zoom.
    await page.mouse.click(at!.x, at!.y);
    await page.locator('#flame-search').fill(query);
    const status = await page.locator('#flame-status').innerText();
    expect(status).toContain(`Zoomed to ${frame}`);
    expect(status).toContain(`${matching} matching frame${matching === 1 ? '' : 's'}, ${humanBytes(expected)} (`);
    const found = await page.evaluate((q) => window.memscopeFlame!.search(q), query);
    expect(found).toEqual({ frames: matching, total: expected });
    await page.screenshot({ path: join(artifacts, 'flame-search.png') });

    // The segments view, one select away; what the pointer was over in the other graph is gone.
    await page.mouse.move(at!.x, at!.y);
    expect(await page.locator('#flame-hover').innerText()).not.toBe('');
    await page.selectOption('#flame-select', '1');
    expect(await page.locator('#flame-status').innerText()).toMatch(/^Segments/);
    expect(await page.locator('#flame-hover').innerText()).toBe('');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a source without flame graphs has no flame section', async () => {
    const f = await openMemoryFile(fixture('traces/kineto_modern_memory.json.gz'));
    if (f.kind !== 'trace') throw new Error('expected a trace');
    const { page, errors } = await open(traceToReport(f.trace, 'x.json.gz', DEFAULT_CAPS), 'flame-trace');
    expect(await page.locator('#flames').isVisible()).toBe(false);
    expect(errors).toEqual([]);
    await page.close();
  });
});
