/**
 * Shared plumbing of the PyTorch-file analysis verbs (summary, stats, trace,
 * segments, memory, compare, plot): open a file with a progress bar, pick
 * colours only for a terminal, parse numeric options, write outputs.
 */
import { writeFileSync } from 'node:fs';
import pc from 'picocolors';
import { MemscopeError } from '../core/errors.js';
import type { TextStyle } from '../report/torch-text.js';
import { openMemoryFile, openSnapshotFile, type MemoryFile } from '../torch/open-node.js';
import type { MemorySnapshot } from '../torch/snapshot.js';
import { progressBar } from './progress.js';

export function textStyle(stream: NodeJS.WriteStream = process.stdout): TextStyle {
  const c = pc.createColors(Boolean(stream.isTTY) && !process.env['NO_COLOR']);
  return { heading: (s) => c.bold(s), dim: (s) => c.dim(s), up: (s) => c.red(s), down: (s) => c.green(s) };
}

export async function openWithProgress(path: string): Promise<MemoryFile> {
  const bar = progressBar(`reading ${path}`);
  try {
    return await openMemoryFile(path, { onProgress: bar.update });
  } finally {
    bar.done();
  }
}

export async function openSnapshotWithProgress(path: string, verb: string): Promise<MemorySnapshot> {
  const bar = progressBar(`reading ${path}`);
  try {
    return await openSnapshotFile(path, verb, { onProgress: bar.update });
  } finally {
    bar.done();
  }
}

/** A non-negative integer option, or a usage error naming the option. */
export function intOption(value: string | undefined, name: string, fallback: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new MemscopeError('bad-argument', `${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  return Number(value);
}

export function writeOutput(path: string, content: string, what: string): void {
  try {
    writeFileSync(path, content);
  } catch (err) {
    throw new MemscopeError('write-failed', `cannot write ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  process.stderr.write(`memscope: wrote ${what} to ${path} (${content.length.toLocaleString('en-US')} bytes)\n`);
}

let pipeGuard = false;

/**
 * Writes to stdout; a reader that stops early (`memscope trace f | head`)
 * closes the pipe, which ends the program quietly instead of with EPIPE.
 */
export function printText(text: string): void {
  if (!pipeGuard) {
    pipeGuard = true;
    process.stdout.on('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EPIPE') process.exit(0);
      throw err;
    });
  }
  process.stdout.write(text);
}

export function printJson(value: unknown): void {
  printText(JSON.stringify(value, (_k, v: unknown) => (ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v), 2) + '\n');
}
