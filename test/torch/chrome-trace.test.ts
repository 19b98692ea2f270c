import { describe, it, expect, beforeAll, vi } from 'vitest';
import { mkdtempSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync, gunzipSync } from 'node:zlib';
import { MemscopeError } from '../../src/core/errors.js';
import { ChromeTraceReader, readChromeTrace } from '../../src/torch/chrome-trace.js';
import { defaultGunzipLimit } from '../../src/core/gzip.js';
import { readChromeTraceFile, readJsonTraceFile } from '../../src/torch/chrome-trace-node.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { spawnSync } from 'node:child_process';
import { devicePeak, memoryByOperator, NO_OPERATOR, type MemoryTrace } from '../../src/torch/memory-trace.js';
import { readMemoryTimeline, DEVICE_UNNAMED } from '../../src/torch/memory-timeline.js';
import { formatTraceSummary, traceEventLines } from '../../src/torch/text-reports.js';
import { fixture } from '../support/fixtures.js';


// Real-file tests: generous limits, the test machine is shared and sometimes saturated.
vi.setConfig({ testTimeout: 60_000, hookTimeout: 180_000 });

const repoRoot = path.resolve(import.meta.dirname, '../..');
const MODERN = fixture('traces/kineto_modern_memory.json.gz');
const LEGACY = fixture('traces/kineto_2021_resnet50.json.gz');
const tmp = mkdtempSync(path.join(tmpdir(), 'memscope-trace-'));

function device(trace: MemoryTrace, name: string) {
  const d = trace.devices.find((x) => x.device === name);
  if (!d) throw new Error(`no device ${name} in ${trace.devices.map((x) => x.device).join(', ')}`);
  return d;
}

function expectError(fn: () => unknown, code: string, text: RegExp): void {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(MemscopeError);
    expect((err as MemscopeError).code).toBe(code);
    expect((err as MemscopeError).message).toMatch(text);
    return;
  }
  throw new Error('expected a MemscopeError');
}

async function expectAsyncError(p: Promise<unknown>, code: string, text: RegExp): Promise<void> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(MemscopeError);
  expect((err as MemscopeError).code).toBe(code);
  expect((err as MemscopeError).message).toMatch(text);
}

/*
 * Expected figures below come from test/torch/derive-trace-figures.py, which reads the
 * fixtures with Python's json module and attributes events with a different algorithm
 * (per event: the containing span that starts last), sharing no code with memscope.
 */
describe('Kineto trace, modern layout (Addr / Total Allocated / Total Reserved)', () => {
  let trace: MemoryTrace;
  beforeAll(async () => {
    trace = await readChromeTraceFile(MODERN);
  }, 180_000);

  it('reads every event and every [memory] event', () => {
    expect(trace.source).toBe('kineto');
    expect(trace.eventCount).toBe(216_092);
    expect(trace.memoryEventCount).toBe(28_010);
    expect(trace.devices.map((d) => [d.device, d.count])).toEqual([
      ['cpu', 1240],
      ['cuda:1', 26_770],
    ]);
    expect(trace.eventsByCategory['cpu_op']).toBe(56_680);
    expect(trace.eventsByCategory['kernel']).toBe(19_370);
    expect(trace.deviceNames[1]).toBe('Tesla V100-SXM2-32GB');
  });

  it('peak allocated and reserved come from the recorded totals, in time order', () => {
    const cuda = device(trace, 'cuda:1');
    const peak = devicePeak(cuda);
    expect(peak.peakAllocated).toBe(6_629_508_096);
    expect(peak.peakReserved).toBe(12_782_141_440);
    expect(peak.allocations).toBe(13_385);
    expect(peak.frees).toBe(13_385);
    // 3.8 GiB were live before the profiler's window opened; Kineto's totals tell us so.
    expect(cuda.baseline).toBe(4_096_614_400);
    expect(peak.finalAllocated).toBe(4_096_614_400);
    expect(cuda.allocatedIsRelative).toBe(false);
    // Sorted by (ts, Ev Idx) every total equals the previous total plus the delta
    // (in file order 10 events disagree: Kineto writes events per thread).
    expect(cuda.inconsistentTotals).toBe(0);
    for (let i = 1; i < cuda.count; i++) expect(cuda.time[i]!).toBeGreaterThanOrEqual(cuda.time[i - 1]!);
    expect(cuda.addr![0]).toBeGreaterThan(0);
  });

  it('attributes memory to the innermost CPU operator, as an independent computation does', () => {
    const rows = memoryByOperator(trace, device(trace, 'cuda:1'));
    expect(rows.slice(0, 5).map((r) => [r.name, r.selfNet])).toEqual([
      ['aten::mul', 12_402_728_960],
      ['aten::add', 9_478_615_040],
      ['aten::mm', 8_921_169_920],
      ['aten::empty', 7_206_092_800],
      ['aten::bmm', 3_748_945_920],
    ]);
    // Every event is counted once under "self": the rows add up to the device's net change.
    const cuda = devicePeak(device(trace, 'cuda:1'));
    expect(rows.reduce((s, r) => s + r.selfNet, 0)).toBe(cuda.finalAllocated - cuda.baseline);
    expect(rows.reduce((s, r) => s + r.allocations + r.frees, 0)).toBe(26_770);
    // Inclusive figures include nested operators: a ProfilerStep span holds all of its step's memory.
    const step = rows.find((r) => r.name === 'ProfilerStep#3')!;
    expect(step.selfAllocated).toBe(0);
    expect(step.inclusiveAllocated).toBeGreaterThan(0);
  });
});

describe('Kineto trace, 2021 layout (Device Type / Device Id / signed Bytes only)', () => {
  let trace: MemoryTrace;
  beforeAll(async () => {
    trace = await readChromeTraceFile(LEGACY);
  }, 180_000);

  it('reads the events and sums running totals itself', () => {
    expect(trace.source).toBe('kineto-2021');
    expect(trace.eventCount).toBe(75_718);
    expect(trace.memoryEventCount).toBe(12_838);
    const cuda = device(trace, 'cuda:0');
    const cpu = device(trace, 'cpu'); // Device Id −1
    expect([cpu.count, cuda.count]).toEqual([4618, 8220]);
    expect(cuda.reserved).toBeNull();
    expect(cuda.allocatedIsRelative).toBe(true);
    const peak = devicePeak(cuda);
    expect(peak.peakAllocated).toBe(2_791_636_480);
    expect(peak.peakReserved).toBeNull();
    expect(peak.finalAllocated).toBe(0);
    expect([peak.allocations, peak.frees]).toEqual([4110, 4110]);
    const cpuPeak = devicePeak(cpu);
    expect([cpuPeak.peakAllocated, cpuPeak.finalAllocated, cpuPeak.allocations, cpuPeak.frees]).toEqual([57_803_264, 19_267_840, 2310, 2308]);
  });

  it('attributes memory per operator (Operator spans; tid strings and numbers are the same thread)', () => {
    const rows = memoryByOperator(trace, device(trace, 'cuda:0'));
    expect(rows.slice(0, 5).map((r) => [r.name, r.selfNet])).toEqual([
      ['aten::empty', 34_000_779_264],
      ['aten::threshold_backward', 7_390_494_720],
      ['aten::cudnn_convolution', 4_961_150_976],
      ['aten::add', 4_316_101_632],
      ['aten::cudnn_convolution_backward_input', 1_025_473_536],
    ]);
    // Ops record tid "25738" (string), [memory] events 25738 (number): if they were not
    // matched, every allocation would land under NO_OPERATOR. Only frees do — 3,294 of
    // them, released by the autograd engine between operators.
    const none = rows.find((r) => r.name === NO_OPERATOR)!;
    expect([none.allocations, none.frees]).toEqual([0, 3294]);
    expect(rows.reduce((s, r) => s + r.selfNet, 0)).toBe(0);
    const cpuRows = memoryByOperator(trace, device(trace, 'cpu'));
    expect(cpuRows.slice(0, 3).map((r) => [r.name, r.selfNet])).toEqual([
      ['aten::empty_strided', 115_606_272],
      ['aten::resize_', 115_605_504],
      ['aten::div', 115_604_736],
    ]);
  });
});

const SMALL_TRACE = {
  schemaVersion: 1,
  traceEvents: [
    { ph: 'X', cat: 'cpu_op', name: 'outer', pid: 1, tid: 1, ts: 100, dur: 100 },
    { ph: 'X', cat: 'cpu_op', name: 'inner', pid: 1, tid: 1, ts: 110, dur: 20 },
    { ph: 'X', cat: 'cpu_op', name: 'sibling', pid: 1, tid: 1, ts: 130, dur: 10 },
    { ph: 'X', cat: 'kernel', name: 'gemm "quoted" {braces} [x]', pid: 0, tid: 7, ts: 112, dur: 5, args: { s: 'a\\"b', t: 'ends in a backslash \\', u: '\\\\"}]' } },
    { ph: 'i', s: 't', name: '[memory]', pid: 1, tid: 1, ts: 115, args: { 'Device Type': 1, 'Device Id': 0, Bytes: 1000 } },
    // At 130 'inner' ends and 'sibling' starts: the one starting wins.
    { ph: 'i', s: 't', name: '[memory]', pid: 1, tid: 1, ts: 130, args: { 'Device Type': 1, 'Device Id': 0, Bytes: 24 } },
    { ph: 'i', s: 't', name: '[memory]', pid: 1, tid: 1, ts: 150, args: { 'Device Type': 1, 'Device Id': 0, Bytes: -1000 } },
    { ph: 'i', s: 't', name: '[memory]', pid: 1, tid: 2, ts: 150, args: { 'Device Type': 1, 'Device Id': 0, Bytes: 8 } },
    { ph: 'i', s: 't', name: '[memory]', pid: 1, tid: 1, ts: 500, args: { 'Device Type': 0, 'Device Id': -1, Bytes: 4 } },
  ],
};

describe('ChromeTraceReader on crafted input', () => {
  it('gives the same result whatever the chunking (one character at a time included)', () => {
    const text = JSON.stringify(SMALL_TRACE, null, 1);
    const whole = readChromeTrace(text);
    const r = new ChromeTraceReader();
    for (const ch of text) r.push(ch);
    const pieces = r.finish();
    expect(pieces.memoryEventCount).toBe(5);
    expect(pieces.eventCount).toBe(9);
    expect(JSON.stringify(pieces, replacer)).toBe(JSON.stringify(whole, replacer));
  });

  it('attributes by thread and time, innermost first', () => {
    const trace = readChromeTrace(JSON.stringify(SMALL_TRACE));
    const cuda = device(trace, 'cuda:0');
    const names = Array.from(cuda.operator, (op) => (op < 0 ? NO_OPERATOR : trace.operators.names[trace.operators.nameIndex[op]!]));
    expect(names).toEqual(['inner', 'sibling', 'outer', NO_OPERATOR]);
    expect(Array.from(cuda.allocated)).toEqual([1000, 1024, 24, 32]);
    const rows = memoryByOperator(trace, cuda);
    const outer = rows.find((r) => r.name === 'outer')!;
    expect([outer.selfNet, outer.inclusiveNet, outer.inclusiveAllocated]).toEqual([-1000, 24, 1024]);
    expect(device(trace, 'cpu').count).toBe(1);
  });

  it("reads the profiler's [OutOfMemory] events: device, request, totals then, enclosing operator; summary and trace show them", () => {
    // As torch.profiler writes them (profiler_kineto.cpp, OutOfMemory metadata): the args of a [memory] event without Addr.
    const oom = (ts: number, device: number, bytes: number) => ({ ph: 'i', cat: 'cpu_instant_event', s: 't', name: '[OutOfMemory]', pid: 1, tid: 1, ts, args: { 'Device Type': 1, 'Device Id': device, Bytes: bytes, 'Total Allocated': 1000, 'Total Reserved': 2048, 'Ev Idx': 9 } });
    const events = [
      { ph: 'X', cat: 'cpu_op', name: 'aten::empty', pid: 1, tid: 1, ts: 100, dur: 50 },
      { ph: 'i', cat: 'cpu_instant_event', s: 't', name: '[memory]', pid: 1, tid: 1, ts: 110, args: { 'Device Type': 1, 'Device Id': 0, Addr: 4096, Bytes: 1000, 'Total Allocated': 1000, 'Total Reserved': 2048, 'Ev Idx': 1 } },
      oom(2120, 1, 1 << 30),
      oom(120, 0, 1 << 20),
    ];
    const trace = readChromeTrace(JSON.stringify({ traceEvents: events }));
    expect(trace.outOfMemory).toEqual([
      { device: 'cuda:0', time: 120, bytes: 1 << 20, allocated: 1000, reserved: 2048, operator: 'aten::empty' },
      { device: 'cuda:1', time: 2120, bytes: 1 << 30, allocated: 1000, reserved: 2048, operator: null },
    ]);
    const summary = formatTraceSummary(trace);
    expect(summary).toContain('Out-of-memory errors (2)\n  out of memory on cuda:0 at 0.010 ms: 1.00 MiB requested; allocated 1000 B, reserved 2.00 KiB then; in aten::empty\n  out of memory on cuda:1 at 2.010 ms: 1.00 GiB requested; allocated 1000 B, reserved 2.00 KiB then\n');
    expect(traceEventLines(trace)).toEqual([
      'Device cuda:0 ---------------- 1 events',
      '     0.000 ms  alloc      1000 B @0x1000  → 1000 B, reserved 2.00 KiB  in aten::empty',
      '     0.010 ms  out of memory on cuda:0: 1.00 MiB requested; allocated 1000 B, reserved 2.00 KiB then; in aten::empty',
      'peak 1000 B at 0.000 ms; 1000 B at the end',
      '     2.010 ms  out of memory on cuda:1: 1.00 GiB requested; allocated 1000 B, reserved 2.00 KiB then',
    ]);
  });

  it("times of every device count from the trace's first memory event", () => {
    const mem = (ts: number, device: number, bytes: number, total: number) => ({ ph: 'i', name: '[memory]', pid: 1, tid: 1, ts, args: { 'Device Type': device < 0 ? 0 : 1, 'Device Id': device, Addr: 1, Bytes: bytes, 'Total Allocated': total, 'Total Reserved': 0 } });
    const trace = readChromeTrace(JSON.stringify({ traceEvents: [mem(1000, -1, 8, 8), mem(101_000, 0, 100, 100), mem(151_000, 0, 50, 150)] }));
    // cuda:0 peaks 150 ms after the trace's first memory event (cpu's), not 50 ms after its own first.
    expect(formatTraceSummary(trace)).toMatch(/│ cuda:0 +│ +2 │ +2 │ +0 │ +150 B │ 150\.0 ms │/);
    expect(traceEventLines(trace).at(-1)).toBe('peak 150 B at 150.000 ms; 150 B at the end');
  });

  it('accepts a bare array of events', () => {
    const trace = readChromeTrace(JSON.stringify(SMALL_TRACE.traceEvents));
    expect(trace.memoryEventCount).toBe(5);
  });

  it('refuses an unknown [memory] layout, naming what it found', () => {
    const bad = { traceEvents: [{ ph: 'i', name: '[memory]', ts: 1, pid: 1, tid: 1, args: { Size: 12, Device: 'cuda' } }] };
    expectError(() => readChromeTrace(JSON.stringify(bad)), 'unknown-trace-layout', /unknown layout: args \{Size=12, Device="cuda"\}.*missing or non-numeric: Bytes, Device Type, Device Id/);
  });

  it('refuses a fractional or negative Device Id and a fractional Device Type', () => {
    const event = (type: number, id: number) => ({ ph: 'i', name: '[memory]', ts: 1, pid: 1, tid: 1, args: { Addr: 1, Bytes: 512, 'Total Allocated': 512, 'Total Reserved': 2048, 'Device Type': type, 'Device Id': id } });
    expect(readChromeTrace(JSON.stringify({ traceEvents: [event(1, 0), event(0, -1)] })).devices.map((d) => d.device).sort()).toEqual(['cpu', 'cuda:0']);
    expectError(() => readChromeTrace(JSON.stringify({ traceEvents: [event(1, 0.5)] })), 'unknown-trace-layout', /\[memory\] event 0 has Device Type 1 and Device Id 0\.5; Kineto writes a device type ≥ 0 and a device index ≥ -1, both integers/);
    expectError(() => readChromeTrace(JSON.stringify({ traceEvents: [event(1, -2)] })), 'unknown-trace-layout', /Device Id -2/);
    expectError(() => readChromeTrace(JSON.stringify({ traceEvents: [event(1.5, 0)] })), 'unknown-trace-layout', /Device Type 1\.5/);
  });

  it('escapes control characters in the arg names an error quotes', () => {
    const bad = { traceEvents: [{ ph: 'i', name: '[memory]', ts: 1, pid: 1, tid: 1, args: { 'Size\u001b]0;x\u0007\r': 12 } }] };
    try {
      readChromeTrace(JSON.stringify(bad));
      throw new Error('expected an error');
    } catch (err) {
      expect((err as Error).message).toContain('Size\\x1b]0;x\\x07\\x0d=12');
      expect((err as Error).message).not.toMatch(/[\x00-\x1f]/);
    }
  });

  it('survives hostile [memory] args: deep nesting, arrays, huge keys', () => {
    const deep = `{"traceEvents": [{"name": "[memory]", "ph": "i", "ts": 1, "args": {"Bytes": ${'['.repeat(100_000)}${']'.repeat(100_000)}}}]}`;
    expectError(() => readChromeTrace(deep), 'unknown-trace-layout', /args \{Bytes=\[array of 1\]\}/);
    const arrayArgs = '{"traceEvents": [{"name": "[memory]", "ph": "i", "ts": 1, "args": [1, 2]}]}';
    expectError(() => readChromeTrace(arrayArgs), 'unknown-trace-layout', /has no args object/);
    const long = { traceEvents: [{ name: '[memory]', ph: 'i', ts: 1, args: { Bytes: 'x'.repeat(10_000) } }] };
    expectError(() => readChromeTrace(JSON.stringify(long)), 'unknown-trace-layout', /Bytes="x{40}…"/);
  });

  it('fuzz: thousands of mutated and truncated traces either read or fail with MemscopeError', () => {
    const base = JSON.stringify(SMALL_TRACE, null, 1);
    let seed = 12345;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n; // the low bits of an LCG cycle quickly
    };
    const alphabet = '{}[]",:\\ 0-9eE.[memory]truefalsenull\u00e9\ud800';
    let parsed = 0;
    let refused = 0;
    for (let k = 0; k < 3000; k++) {
      let text = base;
      const edits = 1 + rand(4);
      for (let e = 0; e < edits; e++) {
        const at = rand(text.length);
        const op = rand(3);
        const ch = alphabet[rand(alphabet.length)]!;
        text = op === 0 ? text.slice(0, at) + text.slice(at + 1) : op === 1 ? text.slice(0, at) + ch + text.slice(at) : text.slice(0, at) + ch + text.slice(at + 1);
      }
      if (rand(4) === 0) text = text.slice(0, rand(text.length));
      try {
        const r = new ChromeTraceReader();
        // Random chunking too.
        for (let i = 0; i < text.length; ) {
          const step = 1 + rand(64);
          r.push(text.slice(i, i + step));
          i += step;
        }
        r.finish();
        parsed++;
      } catch (err) {
        if (!(err instanceof MemscopeError)) throw new Error(`mutation ${k} threw ${String(err)} for ${JSON.stringify(text)}`);
        refused++;
      }
    }
    expect(parsed + refused).toBe(3000);
    expect(parsed).toBeGreaterThan(100);
    expect(refused).toBeGreaterThan(100);
  });

  it('refuses a trace mixing the two layouts', () => {
    const mixed = {
      traceEvents: [
        { ph: 'i', name: '[memory]', ts: 1, pid: 1, tid: 1, args: { 'Device Type': 1, 'Device Id': 0, Bytes: 8 } },
        { ph: 'i', name: '[memory]', ts: 2, pid: 1, tid: 1, args: { 'Device Type': 1, 'Device Id': 0, Bytes: 8, 'Total Allocated': 16, 'Total Reserved': 32 } },
      ],
    };
    expectError(() => readChromeTrace(JSON.stringify(mixed)), 'unknown-trace-layout', /event 1 uses the kineto layout but event 0 used kineto-2021/);
  });

  it('refuses JSON that is not a trace, and truncated or broken traces, with a position', () => {
    expectError(() => readChromeTrace('{"segments": [], "device_traces": []}'), 'not-a-trace', /no "traceEvents" array \(top-level keys: "segments", "device_traces"\)/);
    expectError(() => readChromeTrace('\x80\x04\x95'), 'not-a-trace', /at character 0: expected a Chrome trace/);
    const text = JSON.stringify(SMALL_TRACE);
    expectError(() => readChromeTrace(text.slice(0, text.length - 40)), 'truncated-trace', /truncated/);
    expectError(() => readChromeTrace(text.replace('"outer"', '"outer" oops')), 'bad-json', /trace event 0 is not valid JSON/);
    expectError(() => readChromeTrace('{"traceEvents": 5}'), 'not-a-trace', /"traceEvents" is not an array/);
    expectError(() => readChromeTrace(''), 'not-a-trace', /empty input/);
    expectError(() => readChromeTrace('{"traceEvents": []} x'), 'bad-json', /after the end of the trace/);
  });
});

describe('trace files', () => {
  it('reads plain and gzipped JSON alike', async () => {
    const text = JSON.stringify(SMALL_TRACE);
    writeFileSync(path.join(tmp, 'small.json'), text);
    writeFileSync(path.join(tmp, 'small.json.gz'), gzipSync(text));
    const a = await readJsonTraceFile(path.join(tmp, 'small.json'));
    const b = await readJsonTraceFile(path.join(tmp, 'small.json.gz'));
    expect(JSON.stringify(a, replacer)).toBe(JSON.stringify(b, replacer));
    expect(a.memoryEventCount).toBe(5);
  });

  it('reports garbage gzip as bad-gzip and gzip cut short as gzip-truncated', async () => {
    writeFileSync(path.join(tmp, 'garbage.json.gz'), Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3]));
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'garbage.json.gz')), 'bad-gzip', /garbage\.json\.gz: corrupt or truncated gzip data/);
    const real = readFileSync(LEGACY);
    writeFileSync(path.join(tmp, 'cut.json.gz'), real.subarray(0, 40_000));
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'cut.json.gz')), 'gzip-truncated', /cut\.json\.gz: the gzip data ends early \(unexpected end of file\)/);
  });

  it('reports a missing file, an empty file and a non-trace file clearly', async () => {
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'nope.json')), 'file-not-found', /nope\.json: cannot open \(ENOENT\)/);
    writeFileSync(path.join(tmp, 'empty.json'), '');
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'empty.json')), 'not-a-trace', /empty/);
    writeFileSync(path.join(tmp, 'config.json'), '{"name": "memscope", "version": "0.1.0"}');
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'config.json')), 'not-a-trace', /top-level keys: "name", "version"/);
    writeFileSync(path.join(tmp, 'numbers.json'), '[1, 2, 3]');
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'numbers.json')), 'not-a-trace', /not a memory trace/);
  });

  it('reads whitespace before the trace in time linear in its length (128 MiB of spaces, gzipped)', async () => {
    const n = 128 << 20;
    const text = Buffer.alloc(n + 19, 0x20);
    text.write('{"traceEvents": []}', n);
    writeFileSync(path.join(tmp, 'spaces.json.gz'), gzipSync(text, { level: 1 }));
    const t = performance.now();
    const trace = await readJsonTraceFile(path.join(tmp, 'spaces.json.gz'));
    // Linear: ~1 s here; kept and trimmed on every chunk it took minutes.
    expect(performance.now() - t).toBeLessThan(30_000);
    expect(trace.eventCount).toBe(0);
  });

  it('error positions count the leading whitespace it drops', async () => {
    const text = `${' '.repeat(3 << 20)}\n{"traceEvents": [}`;
    writeFileSync(path.join(tmp, 'spaced-bad.json'), text);
    await expectAsyncError(readJsonTraceFile(path.join(tmp, 'spaced-bad.json')), 'bad-json', new RegExp(`at character ${text.length - 1}: expected a trace event object`));
  });

  it('tells a pickle of protocol 0 or 1 to be re-saved with a newer protocol', async () => {
    for (const [name, bytes] of [
      ['p0.pickle', "(dp0\nVsegments\np1\n(lp2\nsVdevice_traces\np3\n(lp4\ns."],
      ['p1.pickle', '}q\u0000(X\u0008\u0000\u0000\u0000segmentsq\u0001]q\u0002u.'],
    ] as const) {
      writeFileSync(path.join(tmp, name), Buffer.from(bytes, 'latin1'));
      await expectAsyncError(readJsonTraceFile(path.join(tmp, name)), 'pickle-unsupported', /a pickle written with protocol 0 or 1 \(text opcodes\).*re-save it with pickle\.dump\(obj, f, protocol=pickle\.HIGHEST_PROTOCOL\)/);
      await expectAsyncError(openMemoryFile(path.join(tmp, name)), 'pickle-unsupported', /protocol 0 or 1/);
    }
  });

  it('streams a real trace in chunks that split events anywhere', async () => {
    // Re-chunk the 2021 fixture at an odd size and compare with the file reader's result.
    const text = gunzipSync(readFileSync(LEGACY)).toString('utf8');
    const r = new ChromeTraceReader();
    for (let i = 0; i < text.length; i += 65_521) r.push(text.slice(i, i + 65_521));
    const trace = r.finish();
    expect(trace.memoryEventCount).toBe(12_838);
    expect(devicePeak(device(trace, 'cuda:0')).peakAllocated).toBe(2_791_636_480);
  }, 180_000);
});

describe('export_memory_timeline JSON', () => {
  it('reads [times, sizes] with the category columns and their totals', () => {
    // PyTorch's layout: sizes rows are [0, PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY, ACTIVATION, GRADIENT, AUTOGRAD_DETAIL, unknown].
    const times = [10, 20, 30];
    const sizes = [
      [0, 100, 0, 0, 0, 0, 0, 0, 0],
      [0, 100, 0, 50, 0, 25, 0, 0, 0],
      [0, 100, 200, 0, 0, 0, 100, 0, 8],
    ];
    const trace = readMemoryTimeline([times, sizes]);
    expect(trace.source).toBe('memory-timeline');
    const d = trace.devices[0]!;
    expect(d.device).toBe(DEVICE_UNNAMED);
    expect(Array.from(d.allocated)).toEqual([100, 175, 408]);
    expect(Array.from(d.bytes)).toEqual([100, 75, 233]);
    expect(trace.categoryNames![1]).toBe('optimizer_state');
    expect(Array.from(d.categoryBytes![1]!)).toEqual([0, 0, 200]);
    expect(devicePeak(d).peakAllocated).toBe(408);
  });

  it('reads the raw form, placing pre-existing memory (time −1) at the first timestamp', () => {
    const raw = [
      [-1, 1, 4096, 0],
      [5000, 2, 1024, 3],
      [7000, 3, -4096, 0],
      [7000, 3, 4096, 0],
      [9000, 4, -1024, 3],
    ];
    const trace = readMemoryTimeline(raw);
    const d = trace.devices[0]!;
    expect(trace.source).toBe('memory-timeline-raw');
    expect(Array.from(d.time)).toEqual([5, 5, 7, 7, 9]);
    expect(Array.from(d.allocated)).toEqual([4096, 5120, 1024, 5120, 4096]);
    expect(Array.from(d.categoryBytes![3]!)).toEqual([0, 1024, 1024, 1024, 0]);
  });

  it('reads timeline files through the same entry point as traces', async () => {
    writeFileSync(path.join(tmp, 'timeline.json'), JSON.stringify([[1, 2], [[0, 1, 0, 0, 0, 0, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0, 0, 0]]]));
    const trace = await readJsonTraceFile(path.join(tmp, 'timeline.json'));
    expect(devicePeak(trace.devices[0]!).peakAllocated).toBe(3);
  });

  it('refuses malformed timelines with the row at fault', () => {
    expectError(() => readMemoryTimeline([[1], [[0, 1, 2]]]), 'bad-memory-timeline', /size row 0 is not 9 numbers/);
    expectError(() => readMemoryTimeline([[1, 2, 3, 9]]), 'bad-memory-timeline', /raw event 0 has unknown action 2|raw event 0 has unknown category index 9/);
    expectError(() => readMemoryTimeline([[1, 7, 3, 0]]), 'bad-memory-timeline', /unknown action 7/);
    expectError(() => readMemoryTimeline({ a: 1 }), 'bad-memory-timeline', /expected a JSON array/);
  });
});

/** Typed arrays compare by content in JSON. */
function replacer(_key: string, value: unknown): unknown {
  if (ArrayBuffer.isView(value)) return Array.from(value as unknown as ArrayLike<number>);
  return value;
}

describe('gzip bombs', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'memscope-gzbomb-'));
  // A real bomb: gzip members of 1 MiB of spaces (~1 KB each) after a valid trace opening, so the
  // JSON reader keeps reading — only the inflated size can stop it. 64 members: 64 MiB from ~70 KB.
  const spaces = gzipSync(Buffer.alloc(1 << 20, 0x20), { level: 9 });
  const bomb = Buffer.concat([gzipSync('{"traceEvents": ['), ...Array.from({ length: 64 }, () => spaces), gzipSync(']}')]);
  const file = path.join(dir, 'bomb.json.gz');
  writeFileSync(file, bomb);

  it('stops inflating at the limit with an error naming the file and the limit', async () => {
    expect(bomb.length).toBeLessThan(100_000);
    expect(gunzipSync(bomb).length).toBeGreaterThan(64 << 20); // it really is 64 MiB inflated
    const err = await openMemoryFile(file, { maxDecompressedBytes: 8 << 20 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MemscopeError);
    expect((err as MemscopeError).code).toBe('gzip-limit');
    expect((err as MemscopeError).message).toBe(
      `${file}: gzip data inflates to more than 8,388,608 bytes (${bomb.length.toLocaleString('en-US')} compressed), memscope's limit for this file; ` +
        'a real file this large can be read with a higher MEMSCOPE_MAX_GUNZIP_BYTES (or the maxDecompressedBytes option)',
    );
    // Under the limit the same file is read to its end (an empty trace).
    const ok = await openMemoryFile(file, { maxDecompressedBytes: 80 << 20 });
    expect(ok.kind).toBe('trace');
  });

  it('defaults to 200× the compressed size with a 4 GiB floor; the CLI takes MEMSCOPE_MAX_GUNZIP_BYTES', () => {
    expect(defaultGunzipLimit(bomb.length)).toBe(4 * 1024 ** 3);
    expect(defaultGunzipLimit(100e6)).toBe(20e9);
    const tsx = path.join(repoRoot, 'node_modules/.bin/tsx');
    const run = spawnSync(tsx, [path.join(repoRoot, 'src/cli/main.ts'), 'summary', file], {
      encoding: 'utf8',
      env: { ...process.env, MEMSCOPE_MAX_GUNZIP_BYTES: '1000000' },
    });
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toMatch(/^memscope: .*bomb\.json\.gz: gzip data inflates to more than 1,000,000 bytes \(/);
    const bad = spawnSync(tsx, [path.join(repoRoot, 'src/cli/main.ts'), 'summary', file], { encoding: 'utf8', env: { ...process.env, MEMSCOPE_MAX_GUNZIP_BYTES: 'lots' } });
    expect([bad.status, bad.stderr.trim()]).toEqual([1, expect.stringMatching(/MEMSCOPE_MAX_GUNZIP_BYTES must be a number of bytes, got "lots"/)]);
  }, 60_000);
});
