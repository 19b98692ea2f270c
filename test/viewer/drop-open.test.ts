// A file read without Node (src/viewer/open-file.ts, what the viewer does with a dropped File)
// yields exactly the data `memscope report` embeds for it, and refuses bad files in the CLI's words.
// Node 20 has Blob, ReadableStream and DecompressionStream, so this runs the browser's code path.
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { loadReportData } from '../../src/cli/commands/report.js';
import { DeviceMemory } from '../../src/allocator/api.js';
import { dumpSnapshot } from '../../src/allocator/snapshot-node.js';
import { openMemoryFile } from '../../src/torch/open-node.js';
import { errorLine, reportDataFromBlob, type OpenProgress } from '../../src/viewer/open-file.js';
import { DEFAULT_CAPS, type ReportData } from '../../src/viewer/report-data.js';
import { sourceCli } from '../support/child.js';
import { fixture, repoRoot } from '../support/fixtures.js';
import { execFileSync } from 'node:child_process';

const work = mkdtempSync(join(tmpdir(), 'memscope-drop-open-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A Blob that can only be streamed or sliced: reading it whole (text(), arrayBuffer()) fails the test. */
function streamOnly(bytes: Uint8Array<ArrayBuffer>): Blob {
  const blob = new Blob([bytes]);
  const refuse = (): never => {
    throw new Error('the file was read whole');
  };
  return Object.assign(blob, { text: refuse, arrayBuffer: refuse, bytes: refuse });
}

async function viaBlob(path: string, onProgress?: (p: OpenProgress) => void, pieceBytes?: number): Promise<ReportData> {
  return reportDataFromBlob(streamOnly(readFileSync(path)), path, { onProgress, pieceBytes });
}

async function errorOf(run: () => Promise<unknown>): Promise<string> {
  try {
    await run();
  } catch (err) {
    return errorLine(err);
  }
  throw new Error('expected a refusal');
}

function allocatorSnapshot(): string {
  const m = new DeviceMemory();
  m.recordMemoryHistory({ enabled: 'all', context: 'all' });
  const keep = m.cachingAllocatorAlloc(3 << 20);
  const gone = m.cachingAllocatorAlloc(1 << 20);
  m.cachingAllocatorDelete(gone);
  void keep;
  const path = join(work, 'allocator.pickle');
  dumpSnapshot(m, path);
  return path;
}

describe('a file read in the browser way', () => {
  let inputs: Record<string, string>;
  beforeAll(() => {
    const gz = join(work, 'transformer_forward_trace.pickle.gz');
    writeFileSync(gz, gzipSync(readFileSync(fixture('torch/transformer_forward_trace.pickle'))));
    // A snapshot saved as JSON (json.dump of the unpickled dict), as users keep them.
    const json = join(work, 'transformer_forward_trace.json');
    execFileSync('python3', ['-c', 'import pickle, json, sys; json.dump(pickle.load(open(sys.argv[1], "rb")), open(sys.argv[2], "w"))', fixture('torch/transformer_forward_trace.pickle'), json]);
    const captureGz = join(work, 'train-leak.capture.ndjson.gz');
    writeFileSync(captureGz, gzipSync(readFileSync(fixture('captures/train-leak.capture.ndjson'))));
    inputs = {
      'snapshot pickle': fixture('torch/transformer_forward_trace.pickle'),
      'gzipped snapshot pickle': gz,
      'snapshot saved as JSON': json,
      'protocol 5 pickle, gzipped': fixture('torch/torch20_history_protocol5.pickle.gz'),
      'state-only snapshot': fixture('torch/state_only_259seg.pickle'),
      'Kineto trace (.json.gz)': fixture('traces/kineto_modern_memory.json.gz'),
      'older Kineto trace': fixture('traces/kineto_2021_resnet50.json.gz'),
      'export_memory_timeline JSON': fixture('traces/memory_timeline_small.json'),
      'memscope capture': fixture('captures/train-leak.capture.ndjson'),
      'gzipped memscope capture': captureGz,
      "memscope's allocator snapshot": allocatorSnapshot(),
    };
  });

  it.each([
    'snapshot pickle',
    'gzipped snapshot pickle',
    'snapshot saved as JSON',
    'protocol 5 pickle, gzipped',
    'state-only snapshot',
    'Kineto trace (.json.gz)',
    'older Kineto trace',
    'export_memory_timeline JSON',
    'memscope capture',
    'gzipped memscope capture',
    "memscope's allocator snapshot",
  ])('%s: the same data as memscope report embeds', async (kind) => {
    const path = inputs[kind]!;
    const fromCli = await loadReportData(path, DEFAULT_CAPS);
    const fromBlob = await viaBlob(path);
    expect(fromBlob).toEqual(fromCli);
    // Not an empty agreement: each kind yields the data its views draw.
    const drawn = fromBlob.timeline.dt.length + (fromBlob.memory?.devices.reduce((n, d) => n + d.bytes.length, 0) ?? 0) + fromBlob.segments.length;
    expect(drawn).toBeGreaterThan(0);
  });

  it('a snapshot saved as JSON is the pickle: the same report, the same summary', async () => {
    const pickle = fixture('torch/transformer_forward_trace.pickle');
    const json = inputs['snapshot saved as JSON']!;
    const fromJson = await loadReportData(json, DEFAULT_CAPS);
    const fromPickle = await loadReportData(pickle, DEFAULT_CAPS);
    expect({ ...fromJson, source: fromPickle.source, title: fromPickle.title }).toEqual(fromPickle);
    const summary = (file: string): string => execFileSync(process.execPath, [join(repoRoot, 'dist/cli/memscope.cjs'), 'summary', file], { encoding: 'utf8' });
    expect(summary(json)).toBe(summary(pickle));
  });

  it('reads in pieces, reporting progress up to the whole file, then the building step', async () => {
    const path = fixture('torch/transformer_forward_trace.pickle');
    const seen: OpenProgress[] = [];
    const data = await viaBlob(path, (p) => seen.push(p), 64 << 10);
    expect(data).toEqual(await loadReportData(path, DEFAULT_CAPS));
    const size = readFileSync(path).length;
    const reading = seen.filter((p) => p.phase === 'reading');
    // One progress call per piece of 64 KiB (the reader may stop early: the pickle ends with STOP).
    expect(reading.length).toBeGreaterThanOrEqual(Math.floor(size / (64 << 10)));
    expect(reading.every((p) => p.bytesRead % (64 << 10) === 0 || p.bytesRead === size)).toBe(true);
    expect(reading.at(-1)!.bytesRead).toBe(size);
    expect(reading.every((p, i) => i === 0 || p.bytesRead >= reading[i - 1]!.bytesRead)).toBe(true);
    expect(seen.at(-1)).toEqual({ phase: 'building', bytesRead: size, totalBytes: size });
  });

  it('a capture is parsed as its pieces arrive, pieces that cut its lines and characters anywhere', async () => {
    const path = fixture('captures/train-leak.capture.ndjson');
    const fromCli = await loadReportData(path, DEFAULT_CAPS);
    for (const piece of [7, 4096]) expect(await viaBlob(path, undefined, piece)).toEqual(fromCli);
    // Gzipped, the same capture under its own name.
    const gz = inputs['gzipped memscope capture']!;
    const fromGz = await loadReportData(gz, DEFAULT_CAPS);
    expect({ ...fromGz, source: fromCli.source }).toEqual(fromCli);
    expect(fromGz.source.file).toBe(gz);
    for (const piece of [7, 4096]) expect(await viaBlob(gz, undefined, piece)).toEqual(fromGz);
  });

  it('refuses bad files with the error memscope report gives', async () => {
    const pickle = readFileSync(fixture('torch/small_3seg.pickle'));
    const bad: Record<string, Uint8Array | string> = {
      'notes.txt': 'hello, not a snapshot',
      'empty.pickle': '',
      'cut.pickle': pickle.subarray(0, 1000),
      'cut.pickle.gz': gzipSync(pickle).subarray(0, 400),
      'junk.pickle': Uint8Array.from([0x80, 0x04, 0x95, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]),
      'numbers.json': '[1, 2, 3]',
      'protocol0.pickle': '(dp0\nVsegments\np1\n(lp2\ns.',
      'snapshot.json': JSON.stringify({ segments: 5, device_traces: [] }),
      'capture-cut.ndjson': '{"format":"memscope-capture","version":99}\n',
    };
    for (const [name, content] of Object.entries(bad)) {
      const path = join(work, name);
      writeFileSync(path, content);
      const cli = await errorOf(() => loadReportData(path, DEFAULT_CAPS));
      const blob = await errorOf(() => viaBlob(path));
      expect(blob, name).toBe(cli);
      expect(blob, name).toMatch(new RegExp(`^memscope: ${path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
    }
  });

  it('the gzip limit refuses as the CLI does', async () => {
    const path = join(work, 'inflates.pickle.gz');
    writeFileSync(path, gzipSync(readFileSync(fixture('torch/small_3seg.pickle'))));
    const cli = await errorOf(() => openMemoryFile(path, { maxDecompressedBytes: 1000 }));
    const blob = await errorOf(() => reportDataFromBlob(streamOnly(readFileSync(path)), path, { maxDecompressedBytes: 1000 }));
    expect(blob).toBe(cli);
    expect(blob).toMatch(/inflates to more than 1,000 bytes/);
  });

  it("the page's error line is the line the CLI prints", async () => {
    const path = join(work, 'bad.pickle');
    writeFileSync(path, readFileSync(fixture('torch/small_3seg.pickle')).subarray(0, 700));
    const cli = await sourceCli(['report', path, '-o', join(work, 'bad.html')]);
    expect(cli.status).toBe(1);
    expect(cli.stderr.trim()).toBe(await errorOf(() => viaBlob(path)));
  });
});
