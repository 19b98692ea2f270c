/**
 * A file's content as byte chunks, inflated as they come when the file is gzipped, with the gunzip
 * limit applied and progress reported: how every Node reader of a file that may be gzipped (PyTorch
 * snapshots and traces, memscope captures) takes it in without holding it whole.
 */
import { createReadStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import { MemscopeError } from './errors.js';
import { defaultGunzipLimit, gunzipLimitError, gzipTruncatedError, isGzip, isTruncatedGzipMessage } from './gzip.js';
import { requireReadableFile, unreadableFile } from './input-file.js';

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
    if (gz && e.code === 'Z_BUF_ERROR' && isTruncatedGzipMessage(e.message)) throw gzipTruncatedError(path, e.message, err);
    if (gz && (e.code?.startsWith('Z_') || e.errno !== undefined)) {
      throw new MemscopeError('bad-gzip', `${path}: corrupt or truncated gzip data (${e.message})`, { cause: err });
    }
    throw new MemscopeError('read-failed', `${path}: cannot read (${e.code ?? e.message})`, { cause: err });
  } finally {
    raw.destroy();
    stream.destroy();
  }
}

/** The first `length` bytes of the content (inflated, for gzip; fewer if it holds less). */
async function firstContentBytes(path: string, length: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let have = 0;
  try {
    for await (const chunk of fileChunks(path)) {
      parts.push(chunk);
      have += chunk.length;
      if (have >= length) break;
    }
  } catch (err) {
    // The head of a file cut short is its head: whether the cut matters is its reader's call.
    if (!(err instanceof MemscopeError && err.code === 'gzip-truncated')) throw err;
  }
  const out = new Uint8Array(Math.min(have, length));
  let at = 0;
  for (const p of parts) {
    if (at >= out.length) break;
    out.set(p.subarray(0, out.length - at), at);
    at += p.length;
  }
  return out;
}

/**
 * The first `length` bytes of a file's content after any gzip layer, and whether there was one: what
 * a reader looks at to tell what the file is. A missing or unreadable file, and an empty one (also
 * once inflated), is a MemscopeError in every verb's wording.
 */
export async function contentHead(path: string, length: number): Promise<{ head: Uint8Array; gz: boolean }> {
  requireReadableFile(path);
  let raw: Uint8Array;
  try {
    raw = await readFileHead(path, length);
  } catch (err) {
    throw unreadableFile(path, err);
  }
  if (raw.length === 0) throw new MemscopeError('empty-file', `${path}: the file is empty`);
  const gz = isGzip(raw);
  const head = gz ? await firstContentBytes(path, length) : raw;
  if (head.length === 0) throw new MemscopeError('empty-file', `${path}: the file is empty once decompressed`);
  return { head, gz };
}
