/**
 * File I/O for trace readers: streams a (possibly gzipped) file through
 * node:zlib and a streaming TextDecoder into `ChromeTraceReader`, so a 50 MB
 * trace is never held as one string. `export_memory_timeline` JSON is small
 * (one row per distinct timestamp) and is parsed whole.
 */
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import { MemscopeError } from '../core/errors.js';
import { ChromeTraceReader } from './chrome-trace.js';
import type { MemoryTrace } from './memory-trace.js';
import { readMemoryTimeline } from './memory-timeline.js';

// node:zlib is loaded when a gzipped file comes (see fileChunks), by `require`: the `memscope` bin
// runs this module in a CommonJS bundle through vm.Script, where `import()` cannot run.
const requireBuiltin = createRequire(import.meta.url);

export interface ReadProgress {
  /** Bytes of the file read so far (compressed bytes for a .gz). */
  readonly bytesRead: number;
  readonly totalBytes: number;
}

export interface FileReadOptions {
  /** Called after each chunk; for progress bars. */
  readonly onProgress?: (p: ReadProgress) => void;
  /**
   * Most bytes a gzipped file may inflate to (default: `defaultGunzipLimit` of its compressed
   * size, or the MEMSCOPE_MAX_GUNZIP_BYTES environment variable): a gzip bomb — a small file that
   * inflates to terabytes — fails with a MemscopeError instead of exhausting memory or time.
   */
  readonly maxDecompressedBytes?: number;
}

/** The absolute floor of the default gunzip limit: 4 GiB. */
export const GUNZIP_LIMIT_FLOOR = 4 * 1024 ** 3;
/** Real Kineto traces compress 10–30×; the default allows 200×. */
export const GUNZIP_LIMIT_RATIO = 200;

/** Default cap on what a gzipped file of `compressedBytes` may inflate to: max(4 GiB, 200 × its size). */
export function defaultGunzipLimit(compressedBytes: number): number {
  return Math.max(GUNZIP_LIMIT_FLOOR, GUNZIP_LIMIT_RATIO * compressedBytes);
}

function gunzipLimit(path: string, compressedBytes: number, options: FileReadOptions): number {
  if (options.maxDecompressedBytes !== undefined) return options.maxDecompressedBytes;
  const env = process.env['MEMSCOPE_MAX_GUNZIP_BYTES'];
  if (env !== undefined && env !== '') {
    if (!/^\d+$/.test(env)) throw new MemscopeError('bad-argument', `MEMSCOPE_MAX_GUNZIP_BYTES must be a number of bytes, got ${JSON.stringify(env)} (reading ${path})`);
    return Number(env);
  }
  return defaultGunzipLimit(compressedBytes);
}

/** First bytes of a file (fewer if it is shorter). */
export async function readFileHead(path: string, length: number): Promise<Uint8Array> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    throw new MemscopeError('file-not-found', `${path}: cannot open (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  try {
    const buf = new Uint8Array(length);
    const { bytesRead } = await handle.read(buf, 0, length, 0);
    return buf.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

export function isGzip(head: Uint8Array): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

/**
 * The file's content as byte chunks, gunzipped when it starts with the gzip
 * magic. Corrupt gzip data becomes a MemscopeError naming the file.
 */
export async function* fileChunks(path: string, options: FileReadOptions = {}): AsyncGenerator<Uint8Array> {
  const head = await readFileHead(path, 2);
  const gz = isGzip(head);
  const totalBytes = (await stat(path)).size;
  const limit = gz ? gunzipLimit(path, totalBytes, options) : Infinity;
  const raw = createReadStream(path, { highWaterMark: 1 << 20 });
  let stream: Readable = raw;
  if (gz) {
    // Loaded here: node:zlib and the stream modules it pulls in cost ~10 ms at start-up, and most
    // files memscope reads (snapshots, plain JSON) are not gzipped.
    const { createGunzip } = requireBuiltin('node:zlib') as typeof import('node:zlib');
    const gunzip = createGunzip({ chunkSize: 1 << 20 });
    raw.on('error', (err) => gunzip.destroy(err));
    stream = raw.pipe(gunzip);
  }
  let inflated = 0;
  try {
    for await (const chunk of stream) {
      // Chunks are at most 1 MiB (chunkSize), so at most that much beyond the limit is ever held.
      inflated += (chunk as Uint8Array).length;
      if (inflated > limit) {
        throw new MemscopeError(
          'gzip-limit',
          `${path}: gzip data inflates to more than ${limit.toLocaleString('en-US')} bytes (${totalBytes.toLocaleString('en-US')} compressed), memscope's limit for this file; ` +
            'a real trace this large can be read with a higher MEMSCOPE_MAX_GUNZIP_BYTES (or the maxDecompressedBytes option)',
        );
      }
      options.onProgress?.({ bytesRead: raw.bytesRead, totalBytes });
      yield chunk as Uint8Array;
    }
  } catch (err) {
    if (err instanceof MemscopeError) throw err;
    const e = err as NodeJS.ErrnoException;
    if (gz && (e.code?.startsWith('Z_') || e.errno !== undefined)) {
      throw new MemscopeError('bad-gzip', `${path}: corrupt or truncated gzip data (${e.message})`, { cause: err });
    }
    throw new MemscopeError('read-failed', `${path}: cannot read (${e.code ?? e.message})`, { cause: err });
  } finally {
    raw.destroy();
    stream.destroy();
  }
}

/** Streams a Kineto chrome trace (`.json` or `.json.gz`) into the memory-trace model. */
export async function readChromeTraceFile(path: string, options: FileReadOptions = {}): Promise<MemoryTrace> {
  const reader = new ChromeTraceReader({ source: path });
  const decoder = new TextDecoder('utf-8');
  for await (const chunk of fileChunks(path, options)) reader.push(decoder.decode(chunk, { stream: true }));
  reader.push(decoder.decode());
  return reader.finish();
}

/** What a JSON memory file is, judged from its first characters. */
export type JsonTraceKind = 'chrome-trace' | 'memory-timeline';

/** Chrome traces start `{` or `[{`; export_memory_timeline JSON starts `[[`. */
export function sniffJsonKind(text: string): JsonTraceKind | null {
  const m = /^\uFEFF?\s*([{[])\s*([{[\d-])?/.exec(text);
  if (!m) return null;
  if (m[1] === '{') return 'chrome-trace';
  if (m[2] === '{') return 'chrome-trace';
  if (m[2] === '[' ) return 'memory-timeline';
  // `[]` (no events) or `[1,…` are not memory files we know.
  return m[2] === undefined ? 'chrome-trace' : null;
}

/**
 * Reads any JSON memory trace: a Kineto chrome trace (streamed) or an
 * `export_memory_timeline` / `export_memory_timeline_raw` file (parsed whole:
 * it has one small row per timestamp, far smaller than the trace it came from).
 */
export async function readJsonTraceFile(path: string, options: FileReadOptions = {}): Promise<MemoryTrace> {
  const decoder = new TextDecoder('utf-8');
  let reader: ChromeTraceReader | null = null;
  let pending = '';
  /** Whitespace characters dropped before `pending` (error positions stay file positions). */
  let skipped = 0;
  let timelineParts: string[] | null = null;
  for await (const chunk of fileChunks(path, options)) {
    const text = decoder.decode(chunk, { stream: true });
    if (reader) {
      reader.push(text);
      continue;
    }
    if (timelineParts) {
      timelineParts.push(text);
      continue;
    }
    // Whitespace before the first value is dropped as it comes: kept and trimmed on every chunk,
    // a file of a gigabyte of spaces took time quadratic in its length.
    if (pending.length === 0) {
      const kept = text.trimStart();
      skipped += text.length - kept.length;
      pending = kept;
    } else pending += text;
    if (pending.length < 2) continue;
    const kind = sniffJsonKind(pending);
    if (kind === 'chrome-trace') {
      reader = new ChromeTraceReader({ source: path, startOffset: skipped });
      reader.push(pending);
    } else if (kind === 'memory-timeline') {
      timelineParts = [pending];
    } else {
      throw notAMemoryFile(path, pending);
    }
    pending = '';
  }
  const tail = decoder.decode();
  if (reader) {
    reader.push(tail);
    return reader.finish();
  }
  if (timelineParts) {
    timelineParts.push(tail);
    let value: unknown;
    try {
      value = JSON.parse(timelineParts.join(''));
    } catch (err) {
      throw new MemscopeError('bad-json', `${path}: not valid JSON (${(err as Error).message})`);
    }
    return readMemoryTimeline(value, path);
  }
  pending += tail;
  if (pending.trim().length === 0) throw new MemscopeError('not-a-trace', `${path}: the file is empty`);
  const kind = sniffJsonKind(pending);
  if (kind === 'chrome-trace') {
    const r = new ChromeTraceReader({ source: path, startOffset: skipped });
    r.push(pending);
    return r.finish();
  }
  throw notAMemoryFile(path, pending);
}

/**
 * Whether text read from a file starts like a pickle of protocol 0 or 1 (text opcodes): what
 * `pickle.dump(obj, f, protocol=0)` or `=1` writes for a dict or list, which memscope does not
 * read. Protocol 2 and later start with the PROTO byte 0x80 and never reach the JSON readers.
 */
export function looksLikeTextPickle(text: string): boolean {
  // MARK then DICT / LIST (protocol 0: `(dp0`, `(lp0`), or EMPTY_DICT / EMPTY_LIST then a memo
  // put or MARK (protocol 1: `}q\0(`, `]q\0(`), or a GLOBAL line (`cmodule\nname\n`).
  return /^(\((d|l|t)|[}\]](q|r|\(|\.)|c[A-Za-z_][\w.]*\n[A-Za-z_])/.test(text);
}

/** The refusal of a protocol 0/1 pickle, with how to re-save it in a protocol memscope reads. */
export function textPickleRefusal(path: string): MemscopeError {
  return new MemscopeError(
    'pickle-unsupported',
    `${path}: a pickle written with protocol 0 or 1 (text opcodes), which memscope does not read; ` +
      'memory snapshots are pickles of protocol 2 or later: load it in Python and re-save it with pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)',
  );
}

function notAMemoryFile(path: string, text: string): MemscopeError {
  if (looksLikeTextPickle(text)) return textPickleRefusal(path);
  const start = JSON.stringify(text.trimStart().slice(0, 24).replace(/[^\x20-\x7e]/g, '?'));
  return new MemscopeError(
    'not-a-trace',
    `${path}: not a memory trace: expected a Kineto chrome trace (JSON object with "traceEvents") or export_memory_timeline JSON ([[times], [sizes]]), found ${start}`,
  );
}
