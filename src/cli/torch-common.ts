/**
 * Shared plumbing of the PyTorch-file analysis verbs (summary, stats, trace,
 * segments, memory, compare, plot): open a file with a progress bar, pick
 * colours only for a terminal, write outputs. Option values are read by src/cli/options.ts.
 */
import { endQuietlyOnClosedPipe } from './closed-pipe.js';
import { writeFileSync } from 'node:fs';
import pc from 'picocolors';
import { unwritableFile } from '../core/input-file.js';
import type { TextStyle } from '../torch/text-reports.js';
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

/** Writes an output file; a failure is one line naming the file (`out.svg: cannot write it: is a directory`). */
export function writeOutput(path: string, content: string, what: string, options: { quiet?: boolean } = {}): void {
  try {
    writeFileSync(path, content);
  } catch (err) {
    throw unwritableFile(path, err);
  }
  if (!options.quiet) process.stderr.write(`memscope: wrote ${what} to ${path} (${content.length.toLocaleString('en-US')} bytes)\n`);
}

/** Writes to stdout (see endQuietlyOnClosedPipe). */
export function printText(text: string): void {
  endQuietlyOnClosedPipe();
  process.stdout.write(text);
}

export function printJson(value: unknown): void {
  printText(JSON.stringify(value, (_k, v: unknown) => (ArrayBuffer.isView(v) ? Array.from(v as unknown as ArrayLike<number>) : v), 2) + '\n');
}

/** A snapshot's reading warnings (a verb's own included) under its text, as `summary` prints them. */
export function notesText(warnings: readonly string[]): string {
  return warnings.length === 0 ? '' : `notes:\n${warnings.map((w) => `  ${w}\n`).join('')}`;
}
