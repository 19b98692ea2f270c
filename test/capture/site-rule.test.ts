// The site rule (src/core/site-rule.ts): one rule picks an allocation's frame for TFJS captures
// and PyTorch snapshots alike, in leaks, the report, summary and compare, and `--site-skip`
// extends it the same way on every verb.
import { describe, it, expect } from 'vitest';
import { DEFAULT_SITE_RULE, isInternalFrame, siteFrame, siteRule } from '../../src/core/site-rule.js';
import { isMemscopeError } from '../../src/core/errors.js';
import { parseCapture } from '../../src/capture/reader.js';
import { findLeaks } from '../../src/capture/leaks.js';
import { captureToReport, DEFAULT_CAPS } from '../../src/viewer/report-data.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { compareSnapshots, snapshotSummaryJson } from '../../src/torch/text-reports.js';
import type { MemorySnapshot } from '../../src/torch/snapshot.js';
import { fixture } from '../support/fixtures.js';
import { sourceCli } from '../support/child.js';

const FOLDED = '[57 frames in memscope, @tensorflow/tfjs-core, node, @tensorflow/tfjs-layers]';

/**
 * A capture as `memscope run --stacks` writes it: five steps, each keeping one 128-byte tensor
 * allocated under `serve (serve.mjs:15:21)`, called from `async serve.mjs:22:26`; and one
 * 64-byte tensor per step whose stack never leaves the library (a folded run only).
 */
function servingCapture(): string {
  const lines: unknown[] = [
    { format: 'memscope-capture', version: 1, clock: 'ms', created: '2026-01-01T00:00:00.000Z', argv: ['serve.mjs'], backend: null, stacks: true, maxEntries: null },
    ['s', 1, 'Activation'],
    ['s', 2, 'forward'],
    ['s', 3, 'cpu'],
    ['s', 4, '_FusedMatMul'],
    ['s', 5, 'predict'],
    ['s', 6, 'serve (serve.mjs:15:21)'],
    ['s', 7, 'async serve.mjs:22:26'],
    ['s', 8, FOLDED],
    ['k', 1, [8, 6, 7]],
    ['k', 2, [8]],
  ];
  let seq = 0;
  let t = 1;
  for (let step = 0; step < 5; step++) {
    lines.push(['a', t++, seq, 3, 128, 1, 0, 2, 4, 0, 0], ['t', seq++, 1]);
    lines.push(['a', t++, seq, 3, 64, 1, 0, 2, 4, 0, 0], ['t', seq++, 2]);
    lines.push(['m', t++, 5]);
  }
  lines.push(['e', t, { events: seq, dropped: 0, exitCode: 0, error: null }]);
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

async function snapshot(name: string): Promise<MemorySnapshot> {
  const f = await openMemoryFile(fixture(name));
  if (f.kind !== 'snapshot') throw new Error('expected a snapshot');
  return f.snapshot;
}

describe('the site rule', () => {
  it('skips TFJS folded runs, packages, Node internals, TFJS sources and anonymous frames', () => {
    const stack = [FOLDED, 'Engine.runKernel (/app/node_modules/@tensorflow/tfjs-core/dist/tf-core.node.js:4400:20)', 'relu (/src/tfjs-core/src/ops/relu.ts:12:3)', 'processTicksAndRejections (node:internal/process/task_queues:95:5)', 'Array.map (<anonymous>)', 'new Promise (<anonymous>)', 'train (/app/train.mjs:31:15)', 'main (/app/main.mjs:3:1)'];
    expect(siteFrame(DEFAULT_SITE_RULE, stack)).toBe('train (/app/train.mjs:31:15)');
    expect(siteFrame(DEFAULT_SITE_RULE, [FOLDED])).toBeNull();
    // PyTorch frames as the rule reads them: the torch package and native frames are internal.
    expect(isInternalFrame(DEFAULT_SITE_RULE, '/usr/lib/python3/site-packages/torch/nn/modules/module.py:1532:_call_impl')).toBe(true);
    expect(isInternalFrame(DEFAULT_SITE_RULE, '/home/me/train.py:12:step')).toBe(false);
    expect(isInternalFrame(DEFAULT_SITE_RULE, '??:0:c10::cuda::CUDACachingAllocator::malloc', true)).toBe(true);
  });

  it('more internal frames move the site outward; a pattern that does not compile is a usage error naming the option', () => {
    const rule = siteRule(['train\\.mjs']);
    expect(siteFrame(rule, ['train (/app/train.mjs:31:15)', 'main (/app/main.mjs:3:1)'])).toBe('main (/app/main.mjs:3:1)');
    let caught: unknown;
    try {
      siteRule(['(unclosed'], '--site-skip');
    } catch (err) {
      caught = err;
    }
    expect(isMemscopeError(caught) && caught.code === 'usage' && caught.message.startsWith('--site-skip "(unclosed" is not a regular expression')).toBe(true);
  });

  it('leaks and the report name the same site for a capture, and both follow a skip pattern', () => {
    const capture = parseCapture(servingCapture());
    const leaks = findLeaks(capture);
    expect(leaks.groups.map((g) => g.userFrame)).toEqual(['serve (serve.mjs:15:21)', null]);
    const report = captureToReport(capture, 'serve.ndjson', DEFAULT_CAPS);
    const sites = report.allocations.site.map((i) => report.strings[i]);
    // The library-only stack has no site (never its folded run or a TFJS frame).
    expect(new Set(sites)).toEqual(new Set(['serve (serve.mjs:15:21)', '']));
    expect(report.leaks.map((g) => g.userFrame)).toEqual(['serve (serve.mjs:15:21)', null]);

    const rule = siteRule(['serve\\.mjs:15']);
    expect(findLeaks(capture, rule).groups[0]!.userFrame).toBe('async serve.mjs:22:26');
    const moved = captureToReport(capture, 'serve.ndjson', { ...DEFAULT_CAPS, site: rule });
    expect(new Set(moved.allocations.site.map((i) => moved.strings[i]))).toEqual(new Set(['async serve.mjs:22:26', '']));
    expect(moved.leaks[0]!.userFrame).toBe('async serve.mjs:22:26');
  });

  it('summary, compare and the report of a PyTorch snapshot name the same site, and follow a skip pattern together', async () => {
    const snap = await snapshot('torch/transformer_fullstep_trace.pickle');
    for (const [rule, site, liveSite] of [
      [DEFAULT_SITE_RULE, 'training.py:21:cross_entropy_loss', 'optimizers.py:82:step'],
      // training.py and optimizers.py live under cs336_basics/: their callers become the sites.
      [siteRule(['cs336_basics/']), 'benchmark.py:232:run_memory_foward_fullstep', 'benchmark.py:234:run_memory_foward_fullstep'],
    ] as const) {
      const report = snapshotToReport(snap, 'x.pickle', { ...DEFAULT_CAPS, site: rule });
      const m = report.memory!.devices[0]!;
      const largest = m.bytes.indexOf(Math.max(...m.bytes));
      expect(report.strings[m.site[largest]!]).toBe(site);
      // summary charges what is live at the end (the final blocks) to the same rule's sites.
      const summary = snapshotSummaryJson(snap, 50, 3, rule) as { byAllocatingFrame: { frame: string }[] };
      const frames = summary.byAllocatingFrame.map((r) => r.frame).filter((f) => f !== '<no frames recorded>');
      expect(frames).toContain(liveSite);
      const cmp = compareSnapshots(snap, snap, rule);
      expect(cmp.changes).toEqual([]);
      // Every frame summary charges bytes to is one the report names as a site.
      const reportSites = new Set(m.site.map((i) => report.strings[i]));
      for (const f of frames) expect(reportSites.has(f)).toBe(true);
    }
  });

  it('`--site-skip` on summary moves the site; a bad pattern exits 2 with one line', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const plain = await sourceCli(['summary', file, '--json', '--top', '3']);
    const skipped = await sourceCli(['summary', file, '--json', '--top', '3', '--site-skip', 'cs336_basics/']);
    expect(plain.status).toBe(0);
    expect(skipped.status).toBe(0);
    const top = (out: string) => (JSON.parse(out) as { byAllocatingFrame: { frame: string }[] }).byAllocatingFrame.map((r) => r.frame);
    expect(top(plain.stdout)).toContain('optimizers.py:82:step');
    expect(top(plain.stdout)).not.toContain('benchmark.py:234:run_memory_foward_fullstep');
    expect(top(skipped.stdout)).toContain('benchmark.py:234:run_memory_foward_fullstep');
    expect(top(skipped.stdout).filter((f) => f.startsWith('optimizers.py:'))).toEqual([]);
    const bad = await sourceCli(['leaks', file, '--site-skip', '(unclosed']);
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/--site-skip "\(unclosed" is not a regular expression/);
  }, 60_000);
});
