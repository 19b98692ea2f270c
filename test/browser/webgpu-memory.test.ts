// memscope/webgpu on Chromium's real WebGPU (SwiftShader's Vulkan, as in webgpu.test.ts): a
// seeded random program checked against its own ledger at every step, resources reclaimed only by
// garbage collection, exact restore of every patched method, invalid calls unchanged by memscope,
// and a snapshot saved in the page read by the built CLI.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bundlePageScript, launchChromium, openPageWithScript } from '../support/browser.js';
import { runNode } from '../support/child.js';
import { repoRoot } from '../support/fixtures.js';

const ENTRY = `
import { installWebGPU } from './src/webgpu/index.ts';
import { runLedgerProgram } from './test/browser/pages/webgpu-ledger.ts';

async function newDevice(features = []) {
  const adapter = await navigator.gpu.requestAdapter();
  const requiredFeatures = features.filter((f) => adapter.features.has(f));
  return adapter.requestDevice({ requiredFeatures });
}

globalThis.runLedger = async (seed, steps) => {
  const memory = installWebGPU();
  try {
    const device = await newDevice(['texture-compression-bc']);
    const r = await runLedgerProgram(memory, device, seed, steps);
    return { ...r, devices: memory.devices().map((d) => d.device), after: memory.memoryReserved(device) };
  } finally {
    memory.uninstall();
  }
};

// Buffers the page drops without destroy(): memscope keeps no reference to them, so the
// collector reclaims them and memscope's finalizer reports each as GC-only.
globalThis.gcSetup = async () => {
  const memory = installWebGPU();
  globalThis.gcMemory = memory;
  const device = await newDevice();
  globalThis.gcDevice = device;
  (() => {
    for (let i = 0; i < 12; i++) device.createBuffer({ size: 65536, usage: GPUBufferUsage.STORAGE, label: 'dropped-' + i });
  })();
  for (let i = 0; i < 3; i++) device.createBuffer({ size: 4096, usage: GPUBufferUsage.STORAGE, label: 'destroyed-' + i }).destroy();
  globalThis.kept = device.createBuffer({ size: 1024, usage: GPUBufferUsage.STORAGE, label: 'kept' });
  return memory.memoryReserved();
};
globalThis.gcRead = () => {
  const m = globalThis.gcMemory;
  return {
    reclaimed: m.gcReclaimed().map((r) => [r.label, r.bytes, r.freedBy]),
    figures: m.figures().gcReclaimed,
    reserved: m.memoryReserved(),
    live: m.resources().map((r) => r.label),
    trace: m.snapshot().device_traces[0].length,
  };
};

const METHODS = [
  ['GPUAdapter', 'requestDevice'],
  ['GPUDevice', 'createBuffer'],
  ['GPUDevice', 'createTexture'],
  ['GPUDevice', 'createQuerySet'],
  ['GPUDevice', 'destroy'],
  ['GPUBuffer', 'destroy'],
  ['GPUTexture', 'destroy'],
  ['GPUQuerySet', 'destroy'],
];
const own = () => METHODS.map(([c, m]) => Object.getOwnPropertyDescriptor(globalThis[c].prototype, m));

// What an invalid createBuffer does: a binding exception, or a buffer and a validation error.
async function attempt(device, descriptor) {
  device.pushErrorScope('validation');
  let thrown = null;
  let returned = null;
  try {
    returned = device.createBuffer(descriptor).constructor.name;
  } catch (e) {
    thrown = e.constructor.name + ': ' + e.message;
  }
  const error = await device.popErrorScope();
  return { thrown, returned, validation: error ? error.constructor.name + ': ' + error.message : null };
}

globalThis.runIdentity = async () => {
  const before = own();
  const memory = installWebGPU();
  const patched = own().map((d, i) => d.value !== before[i].value);
  const device = await newDevice();
  const over = device.limits.maxBufferSize + 4;
  const cases = [
    { size: 16, label: 'no-usage' },
    { size: 6, usage: GPUBufferUsage.MAP_WRITE, mappedAtCreation: true, label: 'unaligned' },
    { size: over, usage: GPUBufferUsage.STORAGE, label: 'too-big' },
  ];
  const withMemscope = [];
  for (const c of cases) withMemscope.push(await attempt(device, c));
  const counted = memory.memoryReserved(device);
  const warnings = [...memory.warnings];
  memory.uninstall();
  const after = own();
  const plain = await newDevice();
  const without = [];
  for (const c of cases) without.push(await attempt(plain, c));
  return {
    patched,
    restored: after.map((d, i) => d.value === before[i].value && d.writable === before[i].writable && d.enumerable === before[i].enumerable && d.configurable === before[i].configurable),
    withMemscope, without, counted, warnings,
  };
};

globalThis.runSnapshot = async () => {
  const memory = installWebGPU();
  memory.recordMemoryHistory({ maxEntries: 10000 });
  const device = await newDevice();
  const S = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST;
  memory.withAttribution({ category: 'Parameter', framework: 'example' }, () => {
    for (let i = 0; i < 4; i++) device.createBuffer({ size: 262144, usage: S, label: 'weight-' + i });
  });
  memory.step(1);
  const acts = memory.withAttribution({ category: 'Activation', framework: 'example', operator: 'matmul' }, () =>
    [0, 1, 2].map((i) => device.createBuffer({ size: 65536, usage: S, label: 'act-' + i })));
  acts[0].destroy();
  memory.markPooled(acts[1]);
  device.createTexture({ size: [128, 128], format: 'rgba8unorm', usage: GPUTextureUsage.TEXTURE_BINDING, mipLevelCount: 8, label: 'image' });
  memory.endStep();
  const bytes = memory.dumpSnapshot();
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  const result = { pickle: btoa(s), allocated: memory.memoryAllocated(), reserved: memory.memoryReserved(), peak: memory.maxMemoryAllocated() };
  memory.uninstall();
  return result;
};
`;

describe('memscope/webgpu in headless Chromium', () => {
  let browser: Browser;
  let script: string;
  beforeAll(async () => {
    script = await bundlePageScript(ENTRY, 'webgpu-memory-page.ts');
    browser = await launchChromium({ webgpu: true });
  });
  afterAll(async () => {
    await browser?.close();
  });

  async function withPage<T>(fn: (page: Page) => Promise<T>): Promise<T> {
    const { page, errors } = await openPageWithScript(browser, script, { secure: true });
    try {
      const r = await fn(page);
      expect(errors).toEqual([]);
      return r;
    } finally {
      await page.close();
    }
  }
  const call = (page: Page, name: string, ...args: unknown[]): Promise<any> =>
    page.evaluate(([n, a]) => (globalThis as any)[n as string](...(a as unknown[])), [name, args] as const);

  it.each([1, 2, 3])('live bytes equal the page ledger at every step of random program %i, and peaks equal its peak', async (seed) => {
    const r = await withPage((page) => call(page, 'runLedger', seed, 400));
    expect(r.validationError).toBeNull();
    expect(r.mismatches).toEqual([]);
    expect(r.peakAllocated).toBe(r.ledgerPeak);
    expect(r.peakReserved).toBe(r.ledgerPeak);
    expect(r.warnings).toEqual([]);
    expect(r.devices).toEqual(['webgpu:0']);
    expect(r.after).toBe(0);
    // The program covers what the rule has to get right.
    expect(r.created.buffer).toBeGreaterThan(100);
    expect(r.created.texture).toBeGreaterThan(80);
    expect(r.created.querySet).toBeGreaterThan(10);
    expect(r.destroyed).toBeGreaterThan(50);
    expect(r.formats.length).toBeGreaterThan(10);
    expect(r.sampleCounts).toEqual([1, 4]);
    expect(r.dimensions).toEqual(['2d', '3d']);
    expect(r.maxMips).toBeGreaterThan(5);
  });

  it('reports buffers dropped without destroy() as reclaimed only by garbage collection', async () => {
    await withPage(async (page) => {
      expect(await call(page, 'gcSetup')).toBe(12 * 65536 + 1024);
      const cdp = await page.context().newCDPSession(page);
      let r: any;
      for (let i = 0; i < 50; i++) {
        await cdp.send('HeapProfiler.collectGarbage');
        await page.waitForTimeout(100);
        r = await call(page, 'gcRead');
        if (r.reclaimed.length === 12) break;
      }
      expect(r.reclaimed.map((x: unknown[]) => x[0]).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `dropped-${i}`).sort());
      expect(r.reclaimed.every((x: unknown[]) => x[1] === 65536 && x[2] === 'gc')).toBe(true);
      expect(r.figures).toEqual({ count: 12, bytes: 12 * 65536 });
      expect(r.reserved).toBe(1024);
      expect(r.live).toEqual(['kept']);
    });
  });

  it('uninstall restores every patched method exactly; invalid createBuffer calls behave as without memscope', async () => {
    const r = await withPage((page) => call(page, 'runIdentity'));
    expect(r.patched).toEqual([true, true, true, true, true, true, true, true]);
    expect(r.restored).toEqual([true, true, true, true, true, true, true, true]);
    expect(r.withMemscope).toEqual(r.without);
    expect(r.without[0].thrown).toMatch(/^TypeError: /);
    expect(r.without[1].thrown).toMatch(/^RangeError: /);
    expect(r.without[2].validation).toMatch(/^GPUValidationError: /);
    expect(r.counted).toBe(0);
    expect(r.warnings).toEqual([expect.stringMatching(/"too-big" of \d+ bytes is over the device's maxBufferSize/)]);
  });

  it('a snapshot saved in the page is read by `memscope summary` and rendered by `memscope report`', async () => {
    const r = await withPage((page) => call(page, 'runSnapshot'));
    let texture = 0;
    for (let s = 128; s >= 1; s >>= 1) texture += s * s * 4;
    expect(r.reserved).toBe(4 * 262144 + 2 * 65536 + texture);
    expect(r.allocated).toBe(4 * 262144 + 65536 + texture);
    const dir = mkdtempSync(join(tmpdir(), 'memscope-webgpu-'));
    try {
      const file = join(dir, 'webgpu.pickle');
      writeFileSync(file, Buffer.from(r.pickle, 'base64'));
      const cli = join(repoRoot, 'dist/cli/memscope.cjs');
      const summary = await runNode([cli, 'summary', file, '--json']);
      expect(summary.stderr).toBe('');
      expect(summary.status).toBe(0);
      const figures = JSON.parse(summary.stdout);
      expect(figures.deviceType).toBe('webgpu');
      expect(figures.devices.map((d: { name: string }) => d.name)).toEqual(['webgpu:0']);
      expect(figures.segments).toBe(7);
      expect(figures.totals.all.reserved).toBe(r.reserved);
      expect(figures.totals.all.allocated).toBe(r.allocated);
      const text = await runNode([cli, 'summary', file, '--frames', '20']);
      expect(text.stdout).toContain('Parameter · example');
      expect(text.stdout).toContain('buffer "weight-');
      expect(text.stdout).toMatch(/^WebGPU memory snapshot: 7 segments/);
      expect(text.stdout).toContain('WebGPU memory summary, device ID 0');
      expect(text.stdout).not.toMatch(/cuda:\d/);
      const html = join(dir, 'report.html');
      const report = await runNode([cli, 'report', file, '-o', html, '--json']);
      expect(report.status).toBe(0);
      // 8 creates (segment_alloc + alloc), one destroy (free_requested, free_completed, segment_free), one pooled (free_requested, free_completed)
      expect(JSON.parse(report.stdout)).toMatchObject({ timelineEvents: 21, truncated: null });
      const page = readFileSync(html, 'utf8');
      expect(page).toMatch(/^<!doctype html>/);
      expect(page).toContain('WebGPU memory snapshot · 7 segments');
      expect(page).toContain('"webgpu:0"');
      expect(page).not.toContain('"cuda:0"');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
