// The query language (src/viewer/query.ts, docs/QUERY.md) over snapshot reports: its totals
// against CPython's reading of the same pickle (test/viewer/query_truth.py), its filters against
// the report's own columns, and its one-line errors.
import { describe, expect, it } from 'vitest';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { readSnapshotFile } from '../../src/torch/snapshot-node.js';
import { snapshotToReport } from '../../src/viewer/torch-report.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { QueryError, parseBytes, query } from '../../src/viewer/query.js';
import { fixture } from '../support/fixtures.js';
import { sourceCli } from '../support/child.js';

type Truth = Record<string, { peak: number; groups: Record<string, [number, number]> }>;

function truth(file: string): Truth {
  const r = spawnSync('python3', [join(import.meta.dirname, 'query_truth.py'), file], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as Truth;
}

function report(rel: string): ReportData {
  const file = fixture(rel);
  return snapshotToReport(readSnapshotFile(file), file, DEFAULT_CAPS);
}

function errorOf(data: ReportData, text: string): QueryError {
  try {
    query(data, text);
  } catch (e) {
    if (e instanceof QueryError) return e;
    throw e;
  }
  throw new Error(`no error for ${text}`);
}

describe('query', () => {
  const full = report('torch/transformer_fullstep_trace.pickle');
  const dev = full.memory!.devices[0]!;

  it.each(['torch/transformer_fullstep_trace.pickle', 'torch/newest_format_trace.pickle'])('"alive@peak group:user_frame" equals CPython on %s', (rel) => {
    const data = report(rel);
    const want = truth(fixture(rel));
    const r = query(data, 'alive@peak group:user_frame top:100000');
    const got: Record<string, [number, number]> = {};
    for (const g of r.groups!) got[g.key] = [g.count, g.bytes];
    const expected: Record<string, [number, number]> = {};
    for (const dv of Object.values(want)) for (const [k, [c, b]] of Object.entries(dv.groups)) {
      const e = (expected[k] ??= [0, 0]);
      e[0] += c;
      e[1] += b;
    }
    expect(got).toEqual(expected);
    const peaks = Object.values(want).reduce((s, d) => s + d.peak, 0);
    expect(r.bytes).toBe(peaks);
    // Live at the peak, they hold exactly the peak the timeline reports.
    expect(r.peakBytes).toBe(data.memory!.devices.reduce((s, d) => s + d.peakAllocated, 0));
    expect(r.groups!.every((g) => g.peakBytes === g.bytes)).toBe(true);
  });

  it('filters by size with units and ranges', () => {
    const big = dev.bytes.filter((b) => b >= 2 ** 20);
    const r = query(full, 'size>=1MiB');
    expect(r.count).toBe(big.length);
    expect(r.bytes).toBe(big.reduce((s, b) => s + b, 0));
    expect(query(full, 'size:1MiB..').count).toBe(big.length);
    expect(query(full, 'size<1MiB').count + big.length).toBe(dev.bytes.length);
    expect(query(full, 'size:4..4').count).toBe(dev.bytes.filter((b) => b === 4).length);
    expect(parseBytes('1.5 GiB')).toBe(1.5 * 2 ** 30);
    expect(parseBytes('2GB')).toBe(2e9);
  });

  it('filters by lifetime, liveness and never-freed', () => {
    const time: number[] = [];
    let us = 0;
    for (const dt of dev.eventDt) time.push((us += dt) / 1000);
    const end = time[time.length - 1]!;
    const life = (a: number) => (dev.end[a]! < 0 ? end : time[dev.end[a]!]!) - (dev.start[a]! < 0 ? 0 : time[dev.start[a]!]!);
    const long = dev.bytes.map((_, a) => a).filter((a) => life(a) > 10);
    expect(query(full, 'lifetime>10ms').count).toBe(long.length);
    expect(query(full, 'lifetime>10000us').count).toBe(long.length);
    expect(query(full, 'never_freed').count).toBe(dev.end.filter((e) => e < 0).length);
    expect(query(full, '-never_freed').count).toBe(dev.end.filter((e) => e >= 0).length);
    expect(query(full, 'before_trace').count).toBe(dev.start.filter((s) => s < 0).length);
    const t = 100;
    const alive = dev.bytes.map((_, a) => a).filter((a) => (dev.start[a]! < 0 || time[dev.start[a]!]! <= t) && (dev.end[a]! < 0 || time[dev.end[a]!]! > t));
    expect(query(full, 'alive@100ms').count).toBe(alive.length);
    expect(query(full, 'alive@0.1s').count).toBe(alive.length);
  });

  it('filters by frame text, regex, category and phase, and negates', () => {
    const optim = query(full, 'frame:torch/optim');
    expect(optim.count).toBeGreaterThan(0);
    expect(query(full, 'torch/optim').count).toBe(optim.count);
    expect(query(full, 'frame:/OPTIM\\/optimizer\\.py/').count).toBe(optim.count);
    expect(query(full, '-frame:torch/optim').count + optim.count).toBe(dev.bytes.length);
    const byCat = query(full, 'group:category top:100');
    expect(byCat.groups!.reduce((s, g) => s + g.count, 0)).toBe(dev.bytes.length);
    const state = byCat.groups!.find((g) => g.key === 'optimizer_state')!;
    expect(query(full, 'category=optimizer_state').count).toBe(state.count);
    expect(query(full, 'category:optimizer_state phase=optimizer').count).toBe(state.count);
    expect(query(full, 'user_frame:"optimizers.py:82:step" never_freed').count).toBe(291);
    expect(query(full, 'function=step file:optimizers.py').count).toBe(query(full, 'frame:optimizers.py').count);
    expect(query(full, 'device=cuda:0 stream=0 pool:large').count).toBe(query(full, 'size>1MiB').count);
  });

  it('groups, sorts and keeps the top N', () => {
    const r = query(full, 'group:user_frame sort:count top:3');
    expect(r.groups!.length).toBe(3);
    expect(r.groupCount).toBeGreaterThan(3);
    expect(r.groups![0]!.count).toBeGreaterThanOrEqual(r.groups![1]!.count);
    const byKey = query(full, 'group:phase sort:key').groups!.map((g) => g.key);
    expect(byKey).toEqual([...byKey].sort());
    const flat = query(full, 'size>=1MiB top:5');
    expect(flat.groups).toBeNull();
    expect(flat.allocations.map(([d, a]) => full.memory!.devices[d]!.bytes[a])).toEqual([...dev.bytes].sort((x, y) => y - x).slice(0, 5));
  });

  it.each([
    ['sise>3', 0, 'unknown field "sise"'],
    ['size>=1MiB lifetime>3parsecs', 20, '"3parsecs" is not a time'],
    ['size>3Q', 5, '"3Q" is not a size'],
    ['group:line', 6, 'unknown group key "line"'],
    ['frame:/(/', 6, 'bad regular expression'],
    ['user_frame:"abc', 0, 'quote is not closed'],
    ['>=1MiB', 0, 'needs a field'],
    ['alive@noon', 6, 'alive@ takes "peak" or a time'],
    ['top:0', 4, 'top: takes a count'],
    ['size@3', 4, 'size takes a comparison'],
  ])('points at the offending token of %j', (text, at, words) => {
    const e = errorOf(full, text);
    expect(e.at).toBe(at);
    expect(e.message).toContain(words);
    expect(e.message).toMatch(new RegExp(`^column ${at + 1}: `));
    expect(e.message).not.toContain('\n');
  });

  it('asks for events, not times, in a snapshot without time_us', () => {
    const untimed = report('torch/torch20_history.pickle');
    expect(untimed.timeUnit).toBe('event');
    expect(errorOf(untimed, 'lifetime>5ms').message).toContain('no times');
    expect(() => query(untimed, 'lifetime>5')).not.toThrow();
  });

  it('memscope query prints the same totals, as text and --json, and a bad query as one usage line', async () => {
    const file = fixture('torch/transformer_fullstep_trace.pickle');
    const want = query(full, 'alive@peak group:user_frame');
    const json = await sourceCli(['query', file, 'alive@peak group:user_frame', '--json']);
    expect(json.stderr).toBe('');
    expect(json.status).toBe(0);
    const got = JSON.parse(json.stdout) as { count: number; bytes: number; groups: { key: string; count: number; bytes: number }[] };
    expect(got.count).toBe(want.count);
    expect(got.bytes).toBe(full.memory!.devices[0]!.peakAllocated);
    expect(got.groups.map((g) => [g.key, g.count, g.bytes])).toEqual(want.groups!.map((g) => [g.key, g.count, g.bytes]));
    const text = await sourceCli(['query', file, 'category=optimizer_state top:2']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^582 allocations · /);
    expect(text.stdout).toContain('optimizers.py:');
    const bad = await sourceCli(['query', file, 'alive@peak sise>3']);
    expect(bad.status).toBe(2);
    expect(bad.stdout).toBe('');
    expect(bad.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^memscope: query "alive@peak sise>3": column 12: unknown field "sise" /)]);
    const trace = await sourceCli(['query', fixture('traces/kineto_modern_memory.json.gz'), 'group:site']);
    expect(trace.status).toBe(1);
    expect(trace.stderr).toMatch(/reads PyTorch memory snapshots; this is a profiler trace/);
  });
});

