// `memscope ops`: the built-in demo under MemoryTracker, in-process.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MemscopeError } from '../../src/core/errors.js';
import { runOps } from '../../src/cli/commands/ops.js';
import { parseOpTraceStats } from '../../src/tracking/op-traces.js';

describe('memscope ops', () => {
  it('trains the demo, prints the summary and writes plots and stats', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-ops-cli-'));
    const lines: string[] = [];
    const out = await runOps({ backend: 'cpu', outDir: dir, steps: '2', top: '5' }, (l) => lines.push(l));
    const text = lines.join('\n');
    expect(text).toMatch(/2 training step\(s\) of the demo model .* on cpu; loss \d+\.\d{4} → \d+\.\d{4}/);
    expect(text).toContain('Top 5 operators by memory added');
    expect(text).toMatch(/\n *1 {2}.+?\.(forward|backward|optimizer)\.\w+ +\d+ +[+-]/);
    for (const f of ['memory_traces.html', 'memory_traces.svg', 'allocated_memory.svg', 'active_memory.svg', 'reserved_memory.svg', 'memory_traces.json']) {
      expect(existsSync(path.join(dir, f)), f).toBe(true);
    }
    const stats = parseOpTraceStats(readFileSync(out.stats, 'utf8'), out.stats);
    expect(stats.markers.map((m) => `${m.name}@${m.step}`)).toEqual(['fw_start@0', 'fw_bw_boundary@0', 'fw_start@1', 'fw_bw_boundary@1']);
    expect(stats.records.some((r) => r.name.startsWith('demo.bn.forward.'))).toBe(true);
  });

  it('--allocator: reserved, retries and OOMs come from the caching-allocator model', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'memscope-ops-alloc-'));
    const lines: string[] = [];
    // 1 MiB cannot hold even one 2 MiB small-allocation segment: every storage is a modelled OOM (after one retry).
    const tight = await runOps({ backend: 'cpu', outDir: dir, steps: '1', top: '3', capacity: '1MiB' }, (l) => lines.push(l));
    const stats = parseOpTraceStats(readFileSync(tight.stats, 'utf8'), tight.stats);
    expect(stats.reservedSource).toMatch(/caching allocator model/);
    expect(stats.numOoms).toBeGreaterThan(0);
    expect(stats.numAllocRetries).toBe(stats.numOoms);
    expect(lines.join('\n')).toContain(`Allocation retries: ${stats.numAllocRetries}; OOMs: ${stats.numOoms}`);

    const roomy = await runOps({ backend: 'cpu', outDir: dir, steps: '1', top: '3', allocator: true }, () => {});
    const ok = parseOpTraceStats(readFileSync(roomy.stats, 'utf8'), roomy.stats);
    expect([ok.numAllocRetries, ok.numOoms]).toEqual([0, 0]);
    // PyTorch's segments: everything here fits one 2 MiB small-block segment, and reserved never drops below allocated.
    expect(ok.records.every((r) => r.reserved === 2 * 1024 * 1024 && r.reserved >= r.allocated)).toBe(true);
  });

  it('rejects a bad backend or step count with a clear error', async () => {
    const print = () => {};
    await expect(runOps({ backend: 'tpu', outDir: 'x', steps: '2', top: '5' }, print)).rejects.toThrow(MemscopeError);
    await expect(runOps({ backend: 'tpu', outDir: 'x', steps: '2', top: '5' }, print)).rejects.toThrow(/--backend: unknown backend "tpu"/);
    await expect(runOps({ backend: 'cpu', outDir: 'x', steps: '0', top: '5' }, print)).rejects.toThrow(/--steps must be a positive integer, got "0"/);
  });
});
