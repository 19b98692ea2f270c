import type { ReadProgress } from '../core/file-chunks-node.js';

/**
 * A one-line progress bar on stderr for long reads, shown only when stderr is
 * a terminal (never in pipes, logs or tests) and only once a read has taken
 * long enough to be worth watching.
 */
export function progressBar(label: string, stream: NodeJS.WriteStream = process.stderr): { update: (p: ReadProgress) => void; done: () => void } {
  if (!stream.isTTY) return { update: () => {}, done: () => {} };
  const started = Date.now();
  let shown = false;
  let lastDraw = 0;
  return {
    update(p) {
      const now = Date.now();
      if (now - started < 300 || now - lastDraw < 100 || !(p.totalBytes > 0)) return;
      lastDraw = now;
      shown = true;
      const frac = Math.min(1, p.bytesRead / p.totalBytes);
      const width = 30;
      const filled = Math.round(frac * width);
      stream.write(`\r${label} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${(frac * 100).toFixed(0).padStart(3)}%`);
    },
    done() {
      if (shown) stream.write('\r\x1b[2K');
    },
  };
}
