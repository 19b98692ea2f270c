// A capture read in pieces (CaptureParser, readCaptureChunks, readCaptureFile plain or gzipped) is
// the capture read whole: pieces may cut a line, a record or a multi-byte character anywhere, and a
// damaged tail or a bad record is reported at the same line in the same words.
import { describe, it, expect, afterAll } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { gunzipSync, gzipSync } from 'node:zlib';
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CaptureParser, MAX_CAPTURE_LINE, parseCapture, readCaptureChunks, type Capture, type CapturedAlloc } from '../../src/capture/reader.js';
import { readCaptureFile } from '../../src/capture/read-node.js';
import { FileCaptureSink } from '../../src/capture/file-sink-node.js';
import { errorLine } from '../../src/viewer/open-file.js';
import { fixture } from '../support/fixtures.js';
import { prng } from '../support/prng.js';

const work = mkdtempSync(join(tmpdir(), 'memscope-capture-pieces-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const header = JSON.stringify({ format: 'memscope-capture', version: 1, clock: 'ms', created: 'x', argv: ['train.mjs'], backend: 'cpu', stacks: true, maxEntries: null });
const end = '["e",9,{"events":4,"dropped":0,"exitCode":0,"error":null}]';
const body = [
  '["s",1,"cpu"]',
  '["s",2,"Activation"]',
  // Strings of two-, three- and four-byte characters, and one longer than a small piece.
  `["s",3,"dense_ü/層/😀/${'長'.repeat(3000)}"]`,
  '["k",1,[3]]',
  '["a",0.013,1,1,4096,2,3,0,0,0,0]',
  '',
  '["t",1,1]',
  '["a",0.5,2,1,8192,2,3,0,0,0,0]',
  '["f",0.75,2]',
  '["p",1,1,{"cpu":{"Activation":4096}}]',
];

/** Captures as a program may leave them: whole, cut, killed, with CRLF or a byte-order mark. */
const texts: Record<string, string> = {
  'a real capture': readFileSync(fixture('captures/train-leak.capture.ndjson'), 'utf8'),
  whole: [header, ...body, end].join('\n') + '\n',
  'no line end after the last record': [header, ...body, end].join('\n'),
  'the last record cut mid-write': [header, ...body, end.slice(0, 20)].join('\n'),
  'no end record': [header, ...body].join('\n') + '\n',
  'CRLF line ends': [header, ...body, end].join('\r\n') + '\r\n',
  'a byte-order mark': '\ufeff' + [header, ...body, end].join('\n') + '\n',
  'only the header': header,
};

/** `text` pushed in pieces of `sizes` characters, in turn. */
function inPieces(text: string, sizes: () => number): Capture {
  const parser = new CaptureParser('c.ndjson');
  for (let at = 0; at < text.length; ) {
    const n = Math.max(1, sizes());
    parser.push(text.slice(at, at + n));
    at += n;
  }
  return parser.end();
}

/** `bytes` as chunks of `size` bytes. */
async function* chunksOf(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

function outcome(read: () => Capture): Capture | string {
  try {
    return read();
  } catch (err) {
    return errorLine(err);
  }
}

async function outcomeOf(read: () => Promise<Capture>): Promise<Capture | string> {
  try {
    return await read();
  } catch (err) {
    return errorLine(err);
  }
}

describe('a capture read in pieces', () => {
  it.each(Object.keys(texts))('%s: the same capture, pushed in pieces of any size', (name) => {
    const text = texts[name]!;
    const whole = parseCapture(text, 'c.ndjson');
    // Not an empty agreement: every case but the header alone has allocations.
    if (name !== 'only the header') expect(whole.allocs.length).toBeGreaterThan(0);
    const rand = prng(7);
    for (const sizes of [() => 1, () => 2, () => 3, () => 64, () => 1 + rand.int(200)]) expect(inPieces(text, sizes)).toEqual(whole);
  });

  it.each(Object.keys(texts))('%s: its bytes in chunks of any size, and its file plain or gzipped, read as parseCapture reads it whole', async (name) => {
    const bytes = Buffer.from(texts[name]!);
    const path = join(work, `${name.replace(/\W+/g, '-')}.ndjson`);
    writeFileSync(path, bytes);
    writeFileSync(`${path}.gz`, gzipSync(bytes));
    const whole = parseCapture(bytes.toString('utf8'), path);
    // Chunks of 1 and 5 bytes cut every multi-byte character; 64 cuts the 9 KB string record.
    for (const size of [1, 5, 64, 4096]) expect(await readCaptureChunks(chunksOf(bytes, size), path), `chunks of ${size}`).toEqual(whole);
    expect(await readCaptureFile(path)).toEqual(whole);
    expect(await readCaptureFile(`${path}.gz`)).toEqual(parseCapture(bytes.toString('utf8'), `${path}.gz`));
  });

  it('a bad record is refused at its line in the same words, whatever the pieces', async () => {
    const text = [header, ...body.slice(0, 4), '["a",1,2,3,"4",5,0,0,0,0,0]', end].join('\n') + '\n';
    const path = join(work, 'bad.ndjson');
    writeFileSync(path, text);
    const want = `memscope: ${path}: line 6: field 4 (bytes) of a "a" record is not a number: ["a",1,2,3,"4",5,0,0,0,0,0]`;
    expect(outcome(() => parseCapture(text, path))).toBe(want);
    for (const size of [1, 7, 4096]) expect(await outcomeOf(() => readCaptureChunks(chunksOf(Buffer.from(text), size), path))).toBe(want);
    expect(await outcomeOf(() => readCaptureFile(path))).toBe(want);
    writeFileSync(path, gzipSync(text));
    expect(await outcomeOf(() => readCaptureFile(path))).toBe(want);
  });

  it('bytes that are not UTF-8 read as Buffer#toString reads them, wherever a piece ends', async () => {
    // After the first 4 KiB, which tell a capture from binary data.
    const bytes = Buffer.concat([Buffer.from(`${header}\n${body[2]}\n["s",1,"a`), Buffer.from([0xe5, 0xb1, 0xc3, 0xff]), Buffer.from(`b"]\n${body[4]}\n${end}\n`)]);
    const path = join(work, 'not-utf8.ndjson');
    writeFileSync(path, bytes);
    const whole = parseCapture(bytes.toString('utf8'), path);
    expect(whole.allocs.deviceOf(0)).toMatch(/^a\ufffd+b$/);
    for (const size of [1, 2, 3, 4096]) expect(await readCaptureChunks(chunksOf(bytes, size), path)).toEqual(whole);
    expect(await readCaptureFile(path)).toEqual(whole);
  });

  /** A capture whose line 3 (after the header and one record) runs `chars` characters with no line end yet. */
  async function* overlong(chars: number, then: string): AsyncGenerator<Uint8Array> {
    yield Buffer.from(`${header}\n${body[0]}\n`);
    const zeros = new Uint8Array(1 << 20);
    for (let left = chars; left > 0; left -= zeros.length) yield zeros.subarray(0, Math.min(left, zeros.length));
    yield Buffer.from(then);
  }

  it('a line past the longest a capture holds is refused at its line; a tail of one is a damaged tail', async () => {
    const past = MAX_CAPTURE_LINE + 1;
    // Inside the file: damage, named at its line.
    expect(await outcomeOf(() => readCaptureChunks(overlong(past, `\n${end}\n`), 'c.ndjson'))).toBe(
      `memscope: c.ndjson: line 3 is longer than ${MAX_CAPTURE_LINE.toLocaleString('en-US')} characters, which no capture record is`,
    );
    // At the end (a crashed run's zero-filled tail): what came before is kept.
    const cut = await readCaptureChunks(overlong(past, ''), 'c.ndjson');
    expect(cut.truncated).toEqual({ reason: `the last line is not a record (${past.toLocaleString('en-US')} characters without a line end)`, line: 3, bytesIgnored: past });
    expect(cut.allocs.length).toBe(0);
    expect(cut.header.argv).toEqual(['train.mjs']);
    // At the limit, the line is read as any other: here, a tail cut mid-record.
    const atLimit = await readCaptureChunks(overlong(MAX_CAPTURE_LINE, ''), 'c.ndjson');
    expect(atLimit.truncated).toEqual({ reason: 'the last record was cut off mid-write', line: 3, bytesIgnored: MAX_CAPTURE_LINE });
  });
});

describe('a capture written gzipped (a .gz output path)', () => {
  const text = readFileSync(fixture('captures/train-leak.capture.ndjson'), 'utf8');
  /** The capture's text as the writer hands it over: flushes of a few records each. */
  const flushes = text.split(/(?<=\n)/).reduce<string[]>((out, line, i) => {
    if (i % 7 === 0) out.push('');
    out[out.length - 1] += line;
    return out;
  }, []);

  it('is one gzip stream that gunzip, python3 and readCaptureFile read as the plain capture', async () => {
    expect(flushes.length).toBeGreaterThan(10);
    const path = join(work, 'sink.ndjson.gz');
    const sink = new FileCaptureSink(path);
    for (const chunk of flushes) sink.write(chunk);
    sink.close();
    const bytes = readFileSync(path);
    expect(gunzipSync(bytes).toString('utf8')).toBe(text);
    expect(bytes.length).toBeLessThan(Buffer.byteLength(text) / 3);
    // Another gzip reader checks the trailer's CRC-32 and length.
    const py = spawnSync('python3', ['-c', 'import gzip,sys; sys.stdout.write(str(len(gzip.open(sys.argv[1]).read())))', path], { encoding: 'utf8' });
    expect(py.stderr).toBe('');
    expect(py.stdout).toBe(String(Buffer.byteLength(text)));
    expect(await readCaptureFile(path)).toEqual(parseCapture(text, path));
  });

  it('left without its trailer (the program was killed) or cut mid-write, reads as the plain capture cut there', async () => {
    const path = join(work, 'killed.ndjson.gz');
    const sink = new FileCaptureSink(path);
    const kept = flushes.slice(0, 5);
    for (const chunk of kept) sink.write(chunk);
    // No close: the process died here, after its last synchronous write.
    const killed = await readCaptureFile(path);
    expect(killed).toEqual(parseCapture(kept.join(''), path));
    expect(killed.truncated?.reason).toMatch(/^the capture has no end record/);
    expect(killed.allocs.length).toBeGreaterThan(0);
    sink.close();
    // Cut inside the deflate data: what inflated is kept, and the record cut is named.
    const whole = readFileSync(path);
    writeFileSync(path, whole.subarray(0, Math.floor(whole.length * 0.6)));
    const cut = await readCaptureFile(path);
    expect(cut.truncated).not.toBeNull();
    expect(cut.allocs.length).toBeGreaterThan(0);
    expect(cut.allocs.length).toBeLessThanOrEqual(killed.allocs.length);
  });

  it('a snapshot or trace whose gzip ends early is still refused, naming the cut', async () => {
    const path = join(work, 'cut.json.gz');
    writeFileSync(path, gzipSync(JSON.stringify({ traceEvents: [{ name: '[memory]', ph: 'i' }] })).subarray(0, 30));
    const { readJsonTraceFile } = await import('../../src/torch/chrome-trace-node.js');
    expect(await outcomeOf(() => readJsonTraceFile(path) as unknown as Promise<Capture>)).toBe(
      `memscope: ${path}: the gzip data ends early (unexpected end of file): the file was cut short or is still being written`,
    );
  });
});

describe('a capture of many allocations', () => {
  it('keeps every field of thousands of allocations, re-labelled, given stacks and freed', () => {
    const rand = prng(11);
    const lines = [header, '["s",1,"cpu"]', '["s",2,"webgl"]', '["s",3,"Activation"]', '["s",4,"Gradient"]', '["s",5,"dense"]', '["s",6,"forward"]', '["s",7,"MatMul"]', '["k",1,[5]]'];
    const want: CapturedAlloc[] = [];
    const live: number[] = [];
    let seq = 0;
    for (let i = 0; i < 5000; i++) {
      const t = i + rand.int(1000) / 1000;
      const device = 1 + rand.int(2);
      const bytes = rand.next() < 0.01 ? 2 ** 40 + i : 4 * (1 + rand.int(1 << 20));
      const layer = rand.pick([0, 5]);
      const phase = rand.pick([0, 6]);
      const kernel = rand.pick([0, 7, 99]); // 99: never declared, so none
      lines.push(`["a",${t},${i},${device},${bytes},3,${layer},${phase},${kernel},0,${i >> 4}]`);
      want.push({ id: i, t, freeT: null, device: device === 1 ? 'cpu' : 'webgl', bytes, category: 'Activation', layer: layer ? 'dense' : null, phase: phase ? 'forward' : 'none', kernel: kernel === 7 ? 'MatMul' : null, stack: 0, step: i >> 4, seq: seq++, freeSeq: null });
      live.push(i);
      if (rand.next() < 0.1) {
        lines.push(`["c",${i},4]`);
        want[i] = { ...want[i]!, category: 'Gradient' };
      }
      if (rand.next() < 0.1) {
        lines.push(`["t",${i},1]`);
        want[i] = { ...want[i]!, stack: 1 };
      }
      if (rand.next() < 0.6) {
        const k = live.splice(rand.int(live.length), 1)[0]!;
        lines.push(`["f",${t + 0.5},${k}]`);
        want[k] = { ...want[k]!, freeT: t + 0.5, freeSeq: seq++ };
      }
    }
    lines.push(end);
    const cap = parseCapture(lines.join('\n') + '\n', 'c.ndjson');
    expect(cap.allocs.length).toBe(5000);
    expect(cap.eventCount).toBe(seq);
    expect(cap.allocs.toArray()).toEqual(want);
  });
});
