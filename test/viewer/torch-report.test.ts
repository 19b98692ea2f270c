// `memscope report` on real PyTorch files: snapshots (segments/blocks, largest
// allocations with stacks, timeline from device_traces) and Kineto traces.
import { describe, it, expect } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { snapshotToReport, traceToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { siteRule } from '../../src/core/site-rule.js';
import { renderReportHtml } from '../../src/viewer/html.js';
import { viewerBundle } from '../../src/viewer/bundle-node.js';
import { launchChromium } from '../support/browser.js';
import { fixture } from '../support/fixtures.js';
import { pythonPickle } from '../torch/python.js';
import { openReportPage } from '../support/report-page.js';


async function load(path: string): Promise<ReportData> {
  const f = await openMemoryFile(path);
  return f.kind === 'snapshot' ? snapshotToReport(f.snapshot, path, DEFAULT_CAPS) : traceToReport(f.trace, path, DEFAULT_CAPS);
}

/** Per device: bytes of allocations live at the end, and reserved bytes after the last event. */
function finalState(d: ReportData): { allocated: number; reserved: number }[] {
  return d.memory!.devices.map((m) => ({
    allocated: m.bytes.reduce((s, b, i) => s + (m.end[i] < 0 ? b : 0), 0),
    reserved: m.reservedBase + m.reservedDelta.reduce((s, x) => s + x, 0),
  }));
}

describe('PyTorch inputs', () => {
  it('a snapshot with history: the timeline ends at the segments\u2019 allocated and reserved bytes', async () => {
    const d = await load(fixture('torch/transformer_fullstep_trace.pickle'));
    const f = await openMemoryFile(fixture('torch/transformer_fullstep_trace.pickle'));
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const reserved = f.snapshot.segments.reduce((s, x) => s + x.totalSize, 0);
    const [end] = finalState(d);
    expect(end.reserved).toBe(reserved);
    // Allocations live at the end: the trace's sizes, which are requested sizes, at most the blocks'.
    const blocks = f.snapshot.segments.reduce((s, x) => s + x.activeSize, 0);
    expect(end.allocated).toBeLessThanOrEqual(blocks);
    expect(end.allocated).toBeGreaterThan(blocks * 0.95);
    expect(d.segments).toHaveLength(1010);
    expect(d.segments[0].size).toBe(Math.max(...f.snapshot.segments.map((s) => s.totalSize)));
    // The largest allocation carries a stack with Python frames, and its site is the user's frame.
    const m = d.memory!.devices[0];
    const largest = m.bytes.indexOf(Math.max(...m.bytes));
    const frames = d.stacks[m.stack[largest]].map((i) => d.strings[i]);
    expect(frames.some((fr) => /\.py:\d+:/.test(fr))).toBe(true);
    expect(d.strings[m.site[largest]]).toBe('training.py:21:cross_entropy_loss');
    expect(frames[d.memory!.stackFolded[m.stack[largest]]]).toMatch(/training\.py:21:cross_entropy_loss$/);
    expect(d.timeUnit).toBe('ms');
  });

  it('the site skips frames the site rule is given', async () => {
    const f = await openMemoryFile(fixture('torch/transformer_fullstep_trace.pickle'));
    if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
    const d = snapshotToReport(f.snapshot, 'x.pickle', { ...DEFAULT_CAPS, site: siteRule(['cs336_basics/']) });
    const m = d.memory!.devices[0];
    const largest = m.bytes.indexOf(Math.max(...m.bytes));
    // training.py lives under cs336_basics/: its caller in benchmark.py becomes the site.
    expect(d.strings[m.site[largest]]).toBe('benchmark.py:232:run_memory_foward_fullstep');
    expect(d.stacks[m.stack[largest]].map((i) => d.strings[i])[d.memory!.stackFolded[m.stack[largest]]]).toMatch(/benchmark\.py:232:/);
  });

  it('a snapshot without history: final state, blocks as allocations, and a notice', async () => {
    const d = await load(fixture('torch/older_no_settings_6633blocks.pickle'));
    expect(d.notices.join(' ')).toMatch(/no allocation history/);
    expect(d.segments).toHaveLength(672);
    expect(d.segments.reduce((s, x) => s + x.blocks.size.length, 0)).toBe(6633);
  });

  it('a trace holding only a snapshot entry (an OOM dump) is named as that, and counted in the header', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'memscope-torch-report-')), 'oom-dump.pickle');
    const segment = "{'device': 0, 'address': 2**32, 'total_size': 2**21, 'allocated_size': 2**20, 'active_size': 2**20, 'requested_size': 2**20, 'stream': 0, 'segment_type': 'small', 'blocks': [{'address': 2**32, 'size': 2**20, 'requested_size': 2**20, 'state': 'active_allocated', 'frames': []}, {'address': 2**32 + 2**20, 'size': 2**20, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}";
    writeFileSync(file, pythonPickle(`{'segments': [${segment}], 'device_traces': [[{'action': 'snapshot', 'addr': 0, 'size': 2**21, 'stream': 0}]]}`, 4));
    const d = await load(file);
    expect(d.notices).toContain('This snapshot has no allocation history (its 1 trace event is no allocation or segment event): the timeline shows only its final state; the segments view and the largest blocks are exact.');
    expect(d.source.detail).toMatch(/ · 1\.00 MiB allocated of 2\.00 MiB reserved · 1 trace event$/);
  });

  it('a 2021 Kineto trace: relative totals, said so, and operators', async () => {
    const d = await load(fixture('traces/kineto_2021_resnet50.json.gz'));
    expect(d.source.kind).toBe('trace');
    expect(d.notices.join(' ')).toMatch(/relative to the trace start/);
    expect(d.timeline.dt.length).toBeGreaterThan(12000);
  });

  it('the snapshot page shows segments with blocks and the trace page draws', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'memscope-torch-'));
    const app = await viewerBundle();
    const browser = await launchChromium();
    try {
      for (const [name, file] of [
        ['snapshot', fixture('torch/transformer_fullstep_trace.pickle')],
        ['trace', fixture('traces/kineto_modern_memory.json.gz')],
      ] as const) {
        const html = join(dir, `${name}.html`);
        writeFileSync(html, renderReportHtml(await load(file), app));
        const { page, errors } = await openReportPage(browser, html);
        if (name === 'snapshot') {
          expect(await page.locator('#segments').isVisible()).toBe(true);
          expect(await page.locator('.segment').count()).toBe(400);
          expect(await page.locator('.segment-bar span').count()).toBeGreaterThan(400);
          await page.locator('#segments').scrollIntoViewIfNeeded();
          await page.screenshot({ path: 'test-artifacts/report-snapshot-segments.png' });
        } else {
          expect(await page.locator('#segments').isVisible()).toBe(false);
          expect(await page.locator('#kernels-body').innerText()).toMatch(/aten::mm/);
          expect(await page.locator('#kernels > h2').innerText()).toBe('Operators by memory added');
          // Leaks and modules are memscope captures' sections: a trace has none to show.
          expect(await page.locator('#leaks').isVisible()).toBe(false);
          expect(await page.locator('#modules').isVisible()).toBe(false);
          await page.screenshot({ path: 'test-artifacts/report-trace.png' });
        }
        expect(errors).toEqual([]);
        await page.close();
      }
    } finally {
      await browser.close();
    }
  });
});
