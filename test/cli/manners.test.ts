// The CLI's manners, through the built bin (dist/cli/memscope.cjs) as users run it: usage errors
// exit 2, unusable input exits 1, and either way stderr holds one line naming the option or the
// file and the problem, never a stack trace.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { fixture, repoRoot } from '../support/fixtures.js';
import { runNode, type ChildOutcome } from '../support/child.js';
import { python, pythonPickle } from '../torch/python.js';

vi.setConfig({ testTimeout: 180_000 });

const bin = path.join(repoRoot, 'dist/cli/memscope.cjs');
const work = mkdtempSync(path.join(tmpdir(), 'memscope-manners-'));

type Outcome = ChildOutcome;

/**
 * Runs the built bin in `work` (relative file names stay as typed in the messages). A child
 * process of its own, waited for without blocking: a test worker blocked for long misses vitest's
 * calls to it.
 */
function memscope(...args: string[]): Promise<Outcome> {
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run \`npm run build\` first (npm test does)`);
  return runNode([bin, ...args], { cwd: work, env: { ...process.env, MEMSCOPE_COMPILE_CACHE: 'off', NO_COLOR: '1' } });
}

/** The exit code and the stderr lines, for one comparison that shows both when it fails. */
function failure(r: Outcome): { status: number | null; lines: string[] } {
  return { status: r.status, lines: r.stderr.split('\n').filter((l) => l !== '') };
}

const snapshot = fixture('torch/small_3seg.pickle');
const trace = fixture('traces/kineto_2021_resnet50.json.gz');

// Inputs that are not what a verb reads.
mkdirSync(path.join(work, 'some', 'dir'), { recursive: true });
writeFileSync(path.join(work, 'notes.txt'), 'hello, these are my notes\nsecond line\n');
writeFileSync(path.join(work, 'capture.ndjson'), '{"format":"memscope-capture","version":1,"clock":"ms"}\n');
writeFileSync(path.join(work, 'truncated.pickle'), readFileSync(snapshot).subarray(0, 300));
writeFileSync(path.join(work, 'config.json'), '{"name": "app", "version": "1.0.0"}\n');

describe('usage errors exit 2 with one line naming the option and the value', () => {
  it.each([
    [['demo', '--backend', 'foo'], /^memscope: --backend: unknown backend "foo"; expected one of .*cpu.* \(see memscope demo --help\)$/],
    [['demo', '--steps', 'abc'], /^memscope: --steps must be a positive integer, got "abc" \(see memscope demo --help\)$/],
    [['demo', '--units', 'MB'], /^memscope: --units must be one of B, KiB, MiB, GiB, got "MB"/],
    [['summary', snapshot, '--top', '-3'], /^memscope: --top must be a non-negative integer, got "-3" \(see memscope summary --help\)$/],
    [['summary', snapshot, '--frames', '2.5'], /^memscope: --frames must be a non-negative integer, got "2\.5"/],
    [['trace', snapshot, '--limit', 'all'], /^memscope: --limit must be a non-negative integer, got "all"/],
    [['segments', snapshot, '--device', 'gpu zero'], /^memscope: --device must be a non-negative integer, got "gpu zero"/],
    // A device the file has no segment on, by index or by label: the devices it has (it drew an empty graph).
    [['segments', snapshot, '--device', '3'], /^memscope: --device 3: .*small_3seg\.pickle has segments on cuda:0 only/],
    [['memory', snapshot, '--device', 'cuda:3'], /^memscope: --device 3: .*small_3seg\.pickle has segments on cuda:0 only/],
    [['compare', snapshot, snapshot, '--top', 'x'], /^memscope: --top must be a non-negative integer, got "x"/],
    [['plot', trace, '--device', 'cuda:7'], /^memscope: --device cuda:7: .* has cpu/],
    [['ops', '--capacity', 'lots'], /^memscope: --capacity must be a size in bytes such as 24GiB, 512MiB or 17179869184, got "lots" \(see memscope ops --help\)$/],
    [['ops', '--capacity', '0'], /^memscope: --capacity must be a positive size, got "0"/],
    [['ops', '--alloc-conf', 'no_such_setting:1'], /^memscope: allocator settings "no_such_setting:1": unrecognized option "no_such_setting"/],
    [['ops', '--top', '-1'], /^memscope: --top must be a non-negative integer, got "-1"/],
    [['report', snapshot, '--max-events', '0'], /^memscope: --max-events must be a positive integer, got "0" \(see memscope report --help\)$/],
    [['summary'], /^memscope: missing required argument 'file' \(see memscope summary --help\)$/],
    [['summary', snapshot, '--no-such-option'], /^memscope: unknown option '--no-such-option' \(see memscope summary --help\)$/],
    [['no-such-verb'], /^memscope: unknown command 'no-such-verb' \(see memscope --help\)$/],
  ])('memscope %j', async (args, message) => {
    const r = await memscope(...args);
    expect(failure(r)).toEqual({ status: 2, lines: [expect.stringMatching(message)] });
    expect(r.stdout).toBe('');
  });

  it('memscope with no verb prints the help on stderr and exits 2', async () => {
    const r = await memscope();
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^Usage: memscope /);
  });
});

describe('every verb names an unusable input file and the problem in the same words, exit 1', () => {
  const verbs: string[][] = [['summary'], ['stats'], ['trace'], ['segments'], ['memory'], ['plot'], ['report'], ['replay'], ['leaks']];

  it.each(verbs)('memscope %s some/dir: is a directory', async (verb) => {
    expect(failure(await memscope(verb, 'some/dir'))).toEqual({ status: 1, lines: ['memscope: some/dir: is a directory'] });
  });

  it.each(verbs)('memscope %s missing.pickle: no such file', async (verb) => {
    expect(failure(await memscope(verb, 'missing.pickle'))).toEqual({ status: 1, lines: ['memscope: missing.pickle: no such file'] });
  });

  it('compare names whichever of its two files is unusable', async () => {
    expect(failure(await memscope('compare', 'some/dir', snapshot))).toEqual({ status: 1, lines: ['memscope: some/dir: is a directory'] });
    expect(failure(await memscope('compare', snapshot, 'missing.pickle'))).toEqual({ status: 1, lines: ['memscope: missing.pickle: no such file'] });
  });

  it('a verb that needs a snapshot says so, and what the file looks like instead', async () => {
    const needs = (verb: string) => `\`memscope ${verb}\` needs a torch.cuda.memory._dump_snapshot pickle`;
    expect(failure(await memscope('stats', 'notes.txt'))).toEqual({
      status: 1,
      lines: [`memscope: notes.txt: not a PyTorch memory snapshot: looks like text ("hello, these are my notes"); ${needs('stats')}`],
    });
    expect(failure(await memscope('segments', trace))).toEqual({
      status: 1,
      lines: [`memscope: ${trace}: not a PyTorch memory snapshot: looks like a Kineto trace (JSON); ${needs('segments')}`],
    });
    expect(failure(await memscope('memory', 'config.json'))).toEqual({ status: 1, lines: [`memscope: config.json: not a PyTorch memory snapshot: looks like JSON; ${needs('memory')}`] });
    expect(failure(await memscope('compare', snapshot, 'capture.ndjson'))).toEqual({
      status: 1,
      lines: [expect.stringMatching(/^memscope: capture\.ndjson: not a PyTorch memory snapshot: a memscope capture \(written by memscope run\); read it with `memscope leaks` or `memscope report`/)],
    });
    expect(failure(await memscope('replay', 'notes.txt'))).toEqual({ status: 1, lines: ['memscope: notes.txt: not a PyTorch memory snapshot: looks like text ("hello, these are my notes")'] });
    expect(failure(await memscope('replay', 'config.json'))).toEqual({
      status: 1,
      lines: ['memscope: config.json: not a PyTorch memory snapshot: JSON without "segments" (top-level keys: "name", "version")'],
    });
  });

  it('verbs that take other files too name everything they read', async () => {
    expect(failure(await memscope('summary', 'notes.txt'))).toEqual({
      status: 1,
      lines: ['memscope: notes.txt: not a PyTorch memory snapshot or Kineto trace: looks like text ("hello, these are my notes")'],
    });
    expect(failure(await memscope('trace', 'capture.ndjson'))).toEqual({
      status: 1,
      lines: ['memscope: capture.ndjson: not a PyTorch memory snapshot or Kineto trace: a memscope capture (written by memscope run); read it with `memscope leaks` or `memscope report`'],
    });
    expect(failure(await memscope('report', 'notes.txt'))).toEqual({
      status: 1,
      lines: ['memscope: notes.txt: not a memscope capture, PyTorch memory snapshot or Kineto trace: looks like text ("hello, these are my notes")'],
    });
    expect(failure(await memscope('leaks', snapshot))).toEqual({ status: 1, lines: [`memscope: ${snapshot}: not a memscope capture (\`memscope run\` writes them): looks like a pickle`] });
  });

  it('an error found while parsing starts with the file name, then where inside and what', async () => {
    for (const verb of ['summary', 'stats', 'replay']) {
      const r = await memscope(verb, 'truncated.pickle');
      expect({ verb, ...failure(r) }).toEqual({ verb, status: 1, lines: [expect.stringMatching(/^memscope: truncated\.pickle: pickle offset \d+: .+/)] });
    }
  });

  it('replay: nothing to replay is one line and exit 1 in every mode; a bad --allocator is usage (2); the one traced device is the default', async () => {
    const noTrace = ["", "--capacity 24GiB", "--allocator native", "--alloc-conf expandable_segments:True"];
    for (const extra of noTrace) {
      expect(failure(await memscope('replay', snapshot, ...extra.split(' ').filter(Boolean))), extra).toEqual({
        status: 1,
        lines: [`memscope: ${snapshot}: no device trace to replay (record with _record_memory_history(enabled='all'))`],
      });
    }
    const traced = fixture('torch/newest_format_trace.pickle');
    expect(failure(await memscope('replay', traced, '--allocator', 'foo'))).toEqual({ status: 2, lines: ['memscope: --allocator foo: not native, cudaMallocAsync, or an existing .mjs/.js file (see memscope replay --help)'] });
    // A file whose only trace is on device 1 (device 0 has a segment, no trace): the what-if replays it without --device.
    const onDevice1 = path.join(work, 'device1.pickle');
    const segment0 = "{'device': 0, 'address': 2**32, 'total_size': 2**21, 'allocated_size': 0, 'active_size': 0, 'requested_size': 0, 'stream': 0, 'segment_type': 'small', 'blocks': [{'address': 2**32, 'size': 2**21, 'requested_size': 0, 'state': 'inactive', 'frames': []}]}";
    writeFileSync(onDevice1, pythonPickle("{'segments': [" + segment0 + "], 'device_traces': [[], [{'action': a, 'addr': 2**30, 'size': s, 'stream': 0, 'time_us': i, 'frames': []} for i, (a, s) in enumerate([('segment_alloc', 2**21), ('alloc', 512), ('free_requested', 512), ('free_completed', 512)])]]}", 4));
    const r = await memscope('replay', onDevice1, '--capacity', '24GiB', '--json');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    expect(JSON.parse(r.stdout)).toMatchObject({ device: 1 });
    // summary's table for device 0 says that device has no trace, not the snapshot.
    const summary = await memscope('summary', onDevice1);
    expect(summary.stdout).toContain('This device has no trace in the snapshot: Peak Usage equals Cur Usage');
    expect(failure(await memscope('replay', onDevice1, '--capacity', '24GiB', '--device', '0'))).toEqual({
      status: 2,
      lines: [`memscope: ${onDevice1}: device 0 has no trace to replay (traced: 1) (see memscope replay --help)`],
    });
  });

  it('every snapshot verb\u2019s --json carries the reading notes summary --json gives', async () => {
    const file = fixture('torch/torch20_history.pickle');
    const json = async (...args: string[]): Promise<{ warnings?: unknown }> => {
      const r = await memscope(...args, '--json');
      expect(failure(r), args.join(' ')).toEqual({ status: 0, lines: [] });
      return JSON.parse(r.stdout) as { warnings?: unknown };
    };
    const { warnings } = await json('summary', file);
    expect((warnings as string[]).length).toBeGreaterThan(0);
    for (const args of [['replay', file], ['replay', file, '--capacity', '1GiB'], ['replay', file, '--allocator', 'native'], ['query', file, 'top:1'], ['report', file, '-o', 'warned.html'], ['stats', file], ['trace', file]]) {
      expect((await json(...args)).warnings, args.join(' ')).toEqual(warnings);
    }
  });

  it('--device takes an index or a label in every verb that has it', async () => {
    const r = await memscope('segments', snapshot, '--device', 'cuda:0', '--json');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    expect(JSON.parse((await memscope('memory', snapshot, '--device', '0', '--json')).stdout)).toMatchObject({ deviceType: 'cuda' });
    expect(JSON.parse(r.stdout)).toEqual(JSON.parse((await memscope('segments', snapshot, '--device', '0', '--json')).stdout));
    const byIndex = await memscope('plot', fixture('traces/kineto_modern_memory.json.gz'), '--device', '1', '-o', 'plot1.html', '--json');
    expect(failure(byIndex)).toEqual({ status: 0, lines: [expect.stringMatching(/^memscope: wrote the memory timeline to plot1\.html/)] });
    const plotted = JSON.parse(byIndex.stdout) as { devices: { device: string }[]; warnings: unknown[] };
    expect({ devices: plotted.devices.map((d) => d.device), warnings: plotted.warnings }).toEqual({ devices: ['cuda:1'], warnings: [] });
  });

  it('trace --json keeps --limit as the text does: each device\u2019s first events', async () => {
    const r = await memscope('trace', trace, '--json', '--limit', '2');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    const devices = (JSON.parse(r.stdout) as { devices: { count: number; time: number[]; bytes: number[] }[] }).devices;
    expect(devices.length).toBeGreaterThan(1);
    for (const d of devices) expect([d.time.length, d.bytes.length, d.count > 2]).toEqual([2, 2, true]);
  });

  it("trace --json of a snapshot: each entry's action, address, size and stream as python3 reads them, and the site the text's --frames names", async () => {
    const file = fixture('torch/transformer_forward_trace.pickle');
    const r = await memscope('trace', file, '--json', '--limit', '300');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    const [d] = (JSON.parse(r.stdout) as { devices: { count: number; action: string[]; address: number[]; size: number[]; stream: number[]; site: (string | null)[]; time: number[] }[] }).devices;
    const want = JSON.parse(
      python(
        "import pickle,sys,json\nt=pickle.load(open(sys.argv[1],'rb'))['device_traces'][0]\nprint(json.dumps({'n':len(t),'e':[[e['action'],e.get('addr',0),e['size'],e['stream']] for e in t[:300]]}))",
        undefined,
        [file],
      ).toString(),
    ) as { n: number; e: [string, number, number, number][] };
    expect(d!.count).toBe(want.n);
    expect(d!.action.map((a, i) => [a, d!.address[i], d!.size[i], d!.stream[i]])).toEqual(want.e);
    expect(d!.time).toHaveLength(300);
    // The site of each entry is the frame the text's --frames line ends with.
    const lines = (await memscope('trace', file, '--frames')).stdout.split('\n').slice(1, 301);
    expect(d!.site.map((s) => s ?? '')).toEqual(lines.map((l) => /    @ (.*)$/.exec(l)?.[1] ?? ''));
    expect(d!.site.filter((s) => s !== null).length).toBeGreaterThan(250);
  });

  it("trace --json of a profiler trace: each event's address and enclosing operator, as the text lines show them", async () => {
    const r = await memscope('trace', fixture('traces/kineto_modern_memory.json.gz'), '--json', '--limit', '3');
    const cuda = (JSON.parse(r.stdout) as { devices: { device: string; address: number[]; operator: (string | null)[] }[] }).devices.find((d) => d.device === 'cuda:1')!;
    expect(cuda.address.map((a) => `0x${a.toString(16)}`)).toEqual(['0x7f41c2000000', '0x7f423a000000', '0x7f41c2000000']);
    expect(cuda.operator).toEqual(['aten::empty_strided', 'aten::bmm', 'CompiledFunction']);
  });

  it('trace on a profiler trace without memory events says how to record them with the profiler', async () => {
    writeFileSync(path.join(work, 'nomem.json'), JSON.stringify({ traceEvents: [{ name: 'aten::add', ph: 'X', ts: 1, dur: 2, pid: 1, tid: 1 }] }));
    const r = await memscope('trace', 'nomem.json');
    expect({ status: r.status, stdout: r.stdout }).toEqual({ status: 0, stdout: '(no memory events: record them with torch.profiler.profile(profile_memory=True))\n' });
  });

  it('an output that cannot be written is one line naming it', async () => {
    expect(failure(await memscope('segments', snapshot, '-o', 'some/dir'))).toEqual({ status: 1, lines: ['memscope: some/dir: cannot write it: is a directory'] });
  });
});

describe('one spelling per idea: ops --capacity takes sizes with units, --alloc-conf as replay spells it', () => {
  const ops = async (...args: string[]) => {
    const out = path.join(work, `ops-${args.join('-').replace(/[^\w-]/g, '_')}`);
    const r = await memscope('ops', '--steps', '1', '--top', '3', '-o', out, '--json', ...args);
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    return JSON.parse(r.stdout) as { summary: { reservedSource: string; numOoms: number | null; numAllocRetries: number | null; top: unknown[] }; stats: string };
  };

  it('--capacity 24GiB holds the demo; --capacity 1MiB cannot hold one 2 MiB segment', async () => {
    const roomy = await ops('--capacity', '24GiB');
    expect(roomy.summary.reservedSource).toMatch(/caching allocator model/);
    expect(roomy.summary.numOoms).toBe(0);
    expect(roomy.summary.top).toHaveLength(3);
    expect(existsSync(roomy.stats)).toBe(true);
    const tight = await ops('--capacity', '1MiB');
    expect(tight.summary.numOoms).toBeGreaterThan(0);
  });

  it('--alloc-conf is the documented spelling; --allocator-conf still works, hidden from help', async () => {
    expect((await ops('--alloc-conf', 'expandable_segments:True')).summary.reservedSource).toMatch(/caching allocator model/);
    expect((await ops('--allocator-conf', 'expandable_segments:True')).summary.reservedSource).toMatch(/caching allocator model/);
    const help = (await memscope('ops', '--help')).stdout;
    expect(help).toContain('--alloc-conf <conf>');
    expect(help).not.toContain('--allocator-conf');
    expect(help).toContain('--capacity <bytes>');
  });

  it('help shows numeric defaults as numbers, not quoted strings', async () => {
    const wants: [string, string][] = [
      ['leaks', '(default: 8)'],
      ['demo', '(default: 3)'],
      ['demo', '(default: 16)'],
      ['ops', '(default: 20)'],
    ];
    for (const [verb, want] of wants) {
      const help = (await memscope(verb, '--help')).stdout;
      expect(help, verb).toContain(want);
      expect(help, verb).not.toMatch(/\(default: "\d+"\)/);
    }
  });
});

describe('--json on the verbs that report', () => {
  it('demo --json: the MemTracker tables as bytes', async () => {
    const r = await memscope('demo', '--steps', '2', '--batch-size', '4', '--json');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    const js = JSON.parse(r.stdout) as {
      backend: string;
      steps: number;
      losses: number[];
      peak: Record<string, Record<string, number>>;
      current: Record<string, Record<string, number>>;
      modules: { modFqn: string; depth: number; parameterMem: number }[];
    };
    expect([js.backend, js.steps, js.losses.length]).toEqual(['cpu', 2, 2]);
    const current = js.current['cpu']!;
    const peak = js.peak['cpu']!;
    expect(current['Total']).toBeGreaterThan(0);
    expect(peak['Total']).toBeGreaterThanOrEqual(current['Total']!);
    // Dense(32→64) + BatchNorm(64: gamma, beta trainable) + Dense(64→8), float32.
    expect(current['Parameter']).toBe(4 * (32 * 64 + 64 + 64 + 64 + 64 * 8 + 8));
    expect(js.modules.map((m) => m.modFqn)).toEqual(['demo', 'demo.bn', 'demo.dense_in', 'demo.dense_out']);
    expect(js.modules[0]!.parameterMem).toBe(current['Parameter']);
  });

  it('report --json: where the report went and what it holds', async () => {
    const r = await memscope('report', snapshot, '-o', 'r.html', '--json');
    expect(failure(r)).toEqual({ status: 0, lines: [] });
    const js = JSON.parse(r.stdout) as { input: string; output: string; bytes: number; timelineEvents: number; leakGroups: number; truncated: string | null };
    expect(js).toMatchObject({ input: snapshot, output: 'r.html', leakGroups: 0, truncated: null });
    expect(js.bytes).toBe(statSync(path.join(work, 'r.html')).size);
    expect(js.timelineEvents).toBe(0); // a state-only snapshot: no trace events
    // A snapshot with a trace on three devices (8, 0 and 5 events, as python3's pickle reads them).
    const traced = fixture('torch/replay_devices_oom.pickle');
    const t = await memscope('report', traced, '-o', 'traced.html', '--json');
    expect(failure(t)).toEqual({ status: 0, lines: [] });
    expect(JSON.parse(t.stdout).timelineEvents).toBe(13);
  });
});
