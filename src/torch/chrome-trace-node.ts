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
import { defaultGunzipLimit, gunzipLimitError, isGzip, readJsonTraceChunks } from './memory-file-stream.js';

// The platform-free readers and rules, re-exported where Node callers have always found them.
export {
  defaultGunzipLimit,
  GUNZIP_LIMIT_FLOOR,
  GUNZIP_LIMIT_RATIO,
  isGzip,
  looksLikeTextPickle,
  sniffJsonKind,
  textPickleRefusal,
  type JsonTraceKind,
} from './memory-file-stream.js';

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
        throw gunzipLimitError(path, limit, totalBytes);
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

/**
 * Reads any JSON memory trace file: a Kineto chrome trace (streamed) or an
 * `export_memory_timeline` / `export_memory_timeline_raw` file (see readJsonTraceChunks).
 */
export async function readJsonTraceFile(path: string, options: FileReadOptions = {}): Promise<MemoryTrace> {
  return readJsonTraceChunks(fileChunks(path, options), path);
}
