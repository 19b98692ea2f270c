// The report for every source that is not a snapshot timeline: Kineto traces (one chart per
// device, ProfilerStep marks, allocations paired by address), TFJS captures (step labels that
// never overprint, a container's parameters, sites outside TFJS), and the sections a source has
// no data for left out.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { humanBytes } from '../../src/core/units.js';
import { DEFAULT_SITE_RULE, isInternalFrame } from '../../src/core/site-rule.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { devicePeak } from '../../src/torch/memory-trace.js';
import { snapshotToReport, traceToReport } from '../../src/viewer/torch-report.js';
import { captureToReport, DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { readCaptureFile } from '../../src/capture/read-node.js';
import { CapturedAllocs, type Capture, type CapturedModule } from '../../src/capture/reader.js';
import { placeStepLabels } from '../../src/viewer/app/timeline.js';
import { launchChromium } from '../support/browser.js';
import { openReportPage } from '../support/report-page.js';
import { fixture, repoRoot } from '../support/fixtures.js';
import { sourceCli } from '../support/child.js';
import { pythonPickle } from '../torch/python.js';

const artifacts = resolve(repoRoot, 'test-artifacts');
const work = mkdtempSync(join(tmpdir(), 'memscope-sources-'));
const MODERN = fixture('traces/kineto_modern_memory.json.gz');
const RESNET_2021 = fixture('traces/kineto_2021_resnet50.json.gz');

async function torchReport(file: string): Promise<ReportData> {
  const f = await openMemoryFile(file);
  return f.kind === 'snapshot' ? snapshotToReport(f.snapshot, file, DEFAULT_CAPS) : traceToReport(f.trace, file, DEFAULT_CAPS);
}

let browser: Browser;
let app: string;

async function open(data: ReportData, name: string): Promise<{ page: Page; errors: string[] }> {
  const html = join(work, `${name}.html`);
  writeFileSync(html, renderReportHtml(data, app));
  return openReportPage(browser, html, { width: 1280, height: 1000 });
}

/** The drawn step labels' spans on the canvas, left to right. */
async function stepLabelSpans(page: Page): Promise<[number, number][]> {
  const text = (await page.locator('#timeline').getAttribute('data-step-labels')) ?? '';
  return text ? text.split(',').map((s) => s.split('-').map(Number) as [number, number]) : [];
}

function overlaps(spans: [number, number][]): boolean {
  for (let i = 1; i < spans.length; i++) if (spans[i]![0] < spans[i - 1]![1]) return true;
  return false;
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

describe('Kineto traces', () => {
  it('ProfilerStep spans become step marks, and allocations are paired by address with their operator', async () => {
    const d = await torchReport(MODERN);
    expect(d.steps.map((s) => s.label)).toEqual(['ProfilerStep#2', 'ProfilerStep#3', 'ProfilerStep#4', 'ProfilerStep#5', 'ProfilerStep#6']);
    expect(d.steps.every((s, i) => s.t >= 0 && (i === 0 || s.t > d.steps[i - 1]!.t))).toBe(true);
    expect(d.allocations.bytes.length).toBeGreaterThan(1000);
    expect(d.allocationsTotal).toBeGreaterThanOrEqual(d.allocations.bytes.length);
    const f = await openMemoryFile(MODERN);
    if (f.kind !== 'trace') throw new Error('expected a trace');
    const cuda = f.trace.devices.find((x) => x.device === 'cuda:1')!;
    // The largest allocation is one the trace allocated (+bytes at its address) with that size.
    const largest = Math.max(...d.allocations.bytes);
    expect(Math.max(...Array.from(cuda.bytes))).toBe(largest);
    const i = d.allocations.bytes.indexOf(largest);
    expect(d.strings[d.allocations.kernel[i]!]).toMatch(/^aten::/);
    expect(d.allocations.t1[i]).toBeGreaterThan(d.allocations.t0[i]!);
    // The 2021 layout records no addresses: no allocation can be paired.
    const old = await torchReport(RESNET_2021);
    expect(old.allocations.bytes).toEqual([]);
    expect(old.steps.map((s) => s.label)).toEqual(['ProfilerStep#5', 'ProfilerStep#6', 'ProfilerStep#7', 'ProfilerStep#8', 'ProfilerStep#9', 'ProfilerStep#10']);
  });

  it('one chart per device with a selector, never a cross-device sum; step marks; an allocation table', async () => {
    const d = await torchReport(MODERN);
    const f = await openMemoryFile(MODERN);
    if (f.kind !== 'trace') throw new Error('expected a trace');
    const { page, errors } = await open(d, 'kineto-modern');
    expect(await page.locator('#device option').allInnerTexts()).toEqual(['cpu', 'cuda:1']);
    // The busiest device opens first; its peak is its own reserved bytes (allocated + cached).
    expect(await page.locator('#device').inputValue()).toBe('1');
    const cuda = devicePeak(f.trace.devices.find((x) => x.device === 'cuda:1')!);
    // Named as what they are: the stack's top is reserved, the allocated peak beside it (the trace's own figures).
    expect(await page.locator('#range').innerText()).toContain(`peak ${humanBytes(cuda.peakReserved!)} reserved, ${humanBytes(cuda.peakAllocated)} allocated`);
    expect(await page.locator('#legend').innerText()).not.toMatch(/cpu/);
    const labels = await stepLabelSpans(page);
    expect(labels).toHaveLength(5);
    expect(overlaps(labels)).toBe(false);
    await page.screenshot({ path: join(artifacts, 'sources-kineto-cuda.png') });
    await page.selectOption('#device', '0');
    const cpu = devicePeak(f.trace.devices.find((x) => x.device === 'cpu')!);
    await expect.poll(() => page.locator('#range').innerText()).toContain(`peak ${humanBytes(cpu.peakAllocated)}`);
    expect(await page.locator('#legend').innerText()).not.toMatch(/cuda/);
    // Allocations: the table is filled, with operators and addresses, under words for a trace.
    expect(await page.locator('#allocations').isVisible()).toBe(true);
    const first = await page.locator('#allocations-body tbody tr').first().innerText();
    expect(first).toContain(humanBytes(Math.max(...d.allocations.bytes)));
    expect(first).toMatch(/aten::\w+[\s\S]*0x[0-9a-f]+/);
    expect(await page.locator('#kernels > h2').innerText()).toBe('Operators by memory added');
    expect(await page.locator('#leaks').isVisible()).toBe(false);
    expect(await page.locator('#modules').isVisible()).toBe(false);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a trace without addresses shows no allocations section', async () => {
    const { page, errors } = await open(await torchReport(RESNET_2021), 'kineto-2021');
    expect(await page.locator('#allocations').isVisible()).toBe(false);
    expect(await stepLabelSpans(page)).toHaveLength(6);
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('PyTorch snapshots', () => {
  it('show no sections about captures: no leaks, modules or kernels', async () => {
    const { page, errors } = await open(await torchReport(fixture('torch/small_3seg.pickle')), 'snapshot-small');
    for (const id of ['#leaks', '#modules', '#kernels']) expect(await page.locator(id).isVisible()).toBe(false);
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('a source with nothing to draw', () => {
  // As real files come: a snapshot of a process that never allocated on the device (0 segments,
  // one empty trace, its settings), a profiler trace recorded without profile_memory, a capture of
  // a program that made no tensor.
  it.each([
    ['empty.pickle', 'Nothing to draw: the snapshot holds no segment and no trace event.'],
    ['no-memory.json', 'Nothing to draw: the trace has no memory events (PyTorch\u2019s profiler records them with profile_memory=True).'],
    ['empty.capture.ndjson', 'Nothing to draw: the capture recorded no allocation.'],
  ])('%s: one line where the chart would be, no empty sections, no error', async (name, line) => {
    const file = join(work, name);
    if (name.endsWith('.pickle')) writeFileSync(file, pythonPickle("{'segments': [], 'device_traces': [[]], 'allocator_settings': {'max_split_size': -1}}", 4));
    else if (name.endsWith('.json')) writeFileSync(file, JSON.stringify({ traceEvents: [{ name: 'aten::add', ph: 'X', ts: 1, dur: 2, pid: 1, tid: 1 }] }));
    else writeFileSync(file, `${JSON.stringify({ format: 'memscope-capture', version: 1, clock: 'ms', created: 'x', argv: ['t.mjs'], backend: 'cpu', stacks: false, maxEntries: null })}\n["e",1,{"events":0,"dropped":0,"exitCode":0,"error":null}]\n`);
    const r = await sourceCli(['report', file, '-o', `${file}.html`]);
    expect(r.status, r.stderr).toBe(0);
    const { page, errors } = await openReportPage(browser, `${file}.html`);
    expect(await page.locator('#nothing-to-draw').innerText()).toBe(line);
    for (const id of ['timeline', 'search', 'kernels', 'allocations', 'segments', 'flames']) expect(await page.locator(`#${id}`).isVisible(), id).toBe(false);
    if (name.endsWith('.pickle')) expect(await page.locator('#settings-table').isVisible()).toBe(true);
    await page.screenshot({ path: join(artifacts, `nothing-to-draw-${name}.png`) });
    expect(errors).toEqual([]);
    await page.close();
  });
});

describe('step labels', () => {
  it('a label that would run into the previous one is left out; every line still shows', () => {
    // Lines at 100, 130, 300 and one near the right edge (500 of 520); labels 60 wide.
    const placed = placeStepLabels([100, 130, 300, 500], [60, 60, 60, 60], 520, 3, 6);
    expect(placed).toEqual([
      { index: 0, x: 103 },
      { index: 2, x: 303 },
      { index: 3, x: 437 },
    ]);
  });
});

const module = (id: number, parentId: number, path: string, parameterBytes: number, bufferBytes = 0): CapturedModule => ({
  id,
  path,
  className: parentId < 0 ? 'Sequential' : 'Dense',
  parentId,
  states: { states: {}, localPeakForward: {}, localPeakBackward: {}, parameterBytes, bufferBytes },
});

describe('TFJS captures', () => {
  let capturePath: string;
  beforeAll(async () => {
    capturePath = join(work, 'fit.ndjson');
    const r = await sourceCli(['run', '--stacks', '-q', '-o', capturePath, join(repoRoot, 'test/fixtures/scripts/fit.mjs')]);
    expect(r.status).toBe(0);
  }, 180_000);

  it('a container counts its layers\u2019 parameters and buffers', () => {
    const capture = {
      header: { version: 1, created: '2026-01-01', argv: [], backend: null, stacks: false, maxEntries: null },
      allocs: new CapturedAllocs(['']),
      eventCount: 0,
      modules: [module(1, -1, 'sequential_1', 0), module(2, 1, 'sequential_1.dense_Dense1', 160, 8), module(3, 1, 'sequential_1.dense_Dense2', 36)],
      steps: [],
      marks: [],
      kernels: [],
      stacks: new Map(),
      end: null,
      truncated: null,
      unmatchedFrees: 0,
    } as unknown as Capture;
    const d = captureToReport(capture, 'x.ndjson', DEFAULT_CAPS);
    expect(d.modules.map((m) => [m.path, m.parameterBytes, m.bufferBytes])).toEqual([
      ['sequential_1', 196, 8],
      ['sequential_1.dense_Dense1', 160, 8],
      ['sequential_1.dense_Dense2', 36, 0],
    ]);
  });

  it('a real capture: the root model\u2019s parameters equal its own state table\u2019s, and no site is a TFJS frame', async () => {
    const d = captureToReport(await readCaptureFile(capturePath), capturePath, DEFAULT_CAPS);
    const root = d.modules.find((m) => m.depth === 0)!;
    const pre = root.states['Pre-Forward']!;
    const stateParams = Object.values(pre).reduce((s, byCat) => s + (byCat['Parameter'] ?? 0), 0);
    expect(root.parameterBytes).toBeGreaterThan(0);
    expect(root.parameterBytes).toBe(stateParams);
    const sites = d.allocations.site.map((i) => d.strings[i]!).filter(Boolean);
    expect(sites.length).toBeGreaterThan(0);
    for (const s of sites) expect(isInternalFrame(DEFAULT_SITE_RULE, s)).toBe(false);
    expect(sites.every((s) => s.includes('fit.mjs:'))).toBe(true);
  });

  it('the page: step labels never overprint, and the table\u2019s sites are the program\u2019s lines', async () => {
    const d = captureToReport(await readCaptureFile(capturePath), capturePath, DEFAULT_CAPS);
    const { page, errors } = await open(d, 'capture-fit');
    const labels = await stepLabelSpans(page);
    expect(labels.length).toBeGreaterThan(1);
    expect(overlaps(labels)).toBe(false);
    await page.screenshot({ path: join(artifacts, 'sources-capture-steps.png') });
    const siteCells = await page.locator('#allocations-body tbody tr:not(.detail) td:nth-child(7)').allInnerTexts();
    expect(siteCells.length).toBeGreaterThan(0);
    for (const s of siteCells) expect(s === '—' || s === 'framework frames only' || /fit\.mjs:\d+:\d+$/.test(s)).toBe(true);
    const root = d.modules.find((m) => m.depth === 0)!;
    const row = await page.locator('#modules-body > table > tbody > tr:not(.detail)').first().innerText();
    expect(row).toContain(humanBytes(root.parameterBytes));
    expect(errors).toEqual([]);
    await page.close();
  });
});
