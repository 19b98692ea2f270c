/**
 * The rules for gzipped input, with no platform API: how a gzip stream starts, and how far one may
 * inflate before memscope refuses it. Node's zlib (core/file-chunks-node.ts) and the browser's
 * DecompressionStream (the viewer reading a dropped file) apply the same limit with the same words.
 */
import { MemscopeError } from './errors.js';

/** The absolute floor of the default gunzip limit: 4 GiB. */
export const GUNZIP_LIMIT_FLOOR = 4 * 1024 ** 3;
/** Real Kineto traces compress 10–30×; the default allows 200×. */
export const GUNZIP_LIMIT_RATIO = 200;

/** Default cap on what a gzipped file of `compressedBytes` may inflate to: max(4 GiB, 200 × its size). */
export function defaultGunzipLimit(compressedBytes: number): number {
  return Math.max(GUNZIP_LIMIT_FLOOR, GUNZIP_LIMIT_RATIO * compressedBytes);
}

/** Whether `head` starts with gzip's magic bytes. */
export function isGzip(head: Uint8Array): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}

/** The gunzip limit's refusal. */
export function gunzipLimitError(path: string, limit: number, compressedBytes: number): MemscopeError {
  return new MemscopeError(
    'gzip-limit',
    `${path}: gzip data inflates to more than ${limit.toLocaleString('en-US')} bytes (${compressedBytes.toLocaleString('en-US')} compressed), memscope's limit for this file; ` +
      'a real file this large can be read with a higher MEMSCOPE_MAX_GUNZIP_BYTES (or the maxDecompressedBytes option)',
  );
}

/**
 * The refusal of gzip data that stops before its end (a file cut short, or still being written).
 * Code `gzip-truncated`: a reader whose format survives a cut (a capture) takes what inflated
 * before it; every other reader refuses the file.
 */
export function gzipTruncatedError(path: string, detail: string, cause?: unknown): MemscopeError {
  return new MemscopeError('gzip-truncated', `${path}: the gzip data ends early (${detail}): the file was cut short or is still being written`, { cause });
}

/** Whether a platform inflater's error says its input stopped early (Node's zlib, Chromium, Firefox). */
export function isTruncatedGzipMessage(message: string): boolean {
  return /unexpected end of file|truncated|incomplete/i.test(message);
}
