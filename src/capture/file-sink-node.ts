import { closeSync, openSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { GzipFraming } from '../core/gzip-framing.js';
import type { CaptureSink } from './writer.js';

// node:zlib is loaded only for a `.gz` capture, by `require`: the preload runs in the user's
// program, whose start-up should not pay for it otherwise.
const requireBuiltin = createRequire(import.meta.url);

/** How far back deflate matches reach. */
const DEFLATE_WINDOW = 32 * 1024;

/**
 * Writes capture chunks straight to a file descriptor with synchronous
 * writes: once `write` returns, the bytes are the kernel's, so a process
 * killed right after (even by SIGKILL) leaves them in the file.
 *
 * A path ending in `.gz` gets one gzip stream whose deflate data is flushed to a byte boundary
 * after every chunk (as zlib's Z_SYNC_FLUSH does): each `write` leaves a file that inflates to
 * every chunk so far, and readers take a capture whose gzip ends early as a cut capture, as they
 * take a plain one. `close` writes the gzip trailer.
 */
export class FileCaptureSink implements CaptureSink {
  private fd: number | null;
  private readonly gzip: { framing: GzipFraming; deflate: (chunk: Buffer) => Buffer } | null = null;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
    if (path.endsWith('.gz')) {
      const zlib = requireBuiltin('node:zlib') as typeof import('node:zlib');
      // Level 1: the deflate runs in the user's program at each flush.
      // Each chunk is deflated with the 32 KiB before it as the preset dictionary: in the one
      // stream the pieces form, that text is what precedes it, so its matches reach back across
      // flushes, and a capture flushed at every small step compresses as one written whole.
      let window: Buffer = Buffer.alloc(0);
      const deflate = (chunk: Buffer): Buffer => {
        const out = zlib.deflateRawSync(chunk, { level: 1, finishFlush: zlib.constants.Z_SYNC_FLUSH, ...(window.length > 0 ? { dictionary: window } : {}) });
        window = chunk.length >= DEFLATE_WINDOW ? chunk.subarray(chunk.length - DEFLATE_WINDOW) : Buffer.concat([window, chunk]).subarray(-DEFLATE_WINDOW);
        return out;
      };
      this.gzip = { framing: new GzipFraming(), deflate };
      writeSync(this.fd, this.gzip.framing.header());
    }
  }

  write(chunk: string): void {
    if (this.fd === null) return;
    if (this.gzip === null) {
      writeSync(this.fd, chunk);
      return;
    }
    const bytes = Buffer.from(chunk, 'utf8');
    this.gzip.framing.add(bytes);
    writeSync(this.fd, this.gzip.deflate(bytes));
  }

  close(): void {
    if (this.fd === null) return;
    if (this.gzip !== null) writeSync(this.fd, this.gzip.framing.trailer());
    closeSync(this.fd);
    this.fd = null;
  }
}
