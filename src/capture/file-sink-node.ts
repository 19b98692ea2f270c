import { closeSync, openSync, writeSync } from 'node:fs';
import type { CaptureSink } from './writer.js';

/**
 * Writes capture chunks straight to a file descriptor with synchronous
 * writes: once `write` returns, the bytes are the kernel's, so a process
 * killed right after (even by SIGKILL) leaves them in the file.
 */
export class FileCaptureSink implements CaptureSink {
  private fd: number | null;

  constructor(readonly path: string) {
    this.fd = openSync(path, 'w');
  }

  write(chunk: string): void {
    if (this.fd === null) return;
    writeSync(this.fd, chunk);
  }

  close(): void {
    if (this.fd === null) return;
    closeSync(this.fd);
    this.fd = null;
  }
}
