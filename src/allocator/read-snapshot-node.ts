import { closeSync, openSync, readFileSync, readSync } from 'node:fs';
import { MemscopeError } from '../core/errors.js';
import { readPickle, toPlain } from '../torch/pickle/reader.js';
import { readSnapshotFile as readColumnarSnapshot } from '../torch/snapshot-node.js';
import { parsedFromSnapshot, parseSnapshot, type ParsedSnapshot } from './replay.js';

function ioError(path: string, err: unknown): MemscopeError {
  return err instanceof MemscopeError ? err : new MemscopeError('io', `cannot read ${path}: ${(err as Error).message}`);
}

function parseJsonSnapshot(path: string, bytes: Uint8Array): unknown {
  const text = new TextDecoder().decode(bytes).trimStart();
  if (text.startsWith('{')) {
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new MemscopeError('bad-snapshot', `${path}: not valid JSON (${(err as Error).message})`);
    }
  }
  throw new MemscopeError('bad-snapshot', `${path}: neither a pickle (no 0x80 PROTO byte) nor a JSON snapshot`);
}

/** Reads a snapshot file (pickle, or JSON) as plain objects: every key the file has, frames included. */
export function readSnapshotFile(path: string): unknown {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(path));
  } catch (err) {
    throw ioError(path, err);
  }
  if (bytes.length > 0 && bytes[0] === 0x80) return toPlain(readPickle(bytes));
  return parseJsonSnapshot(path, bytes);
}

/**
 * Reads what `memscope replay` needs from a snapshot file. Pickles go through the columnar reader
 * (src/torch/snapshot-node.ts: fast, big files in pieces) instead of readSnapshotFile's plain
 * objects, which replay does not need (it never looks at frames) and which cost several times the
 * time and memory; JSON snapshots are parsed as before.
 */
export function readReplaySnapshot(path: string): ParsedSnapshot {
  let first: number | undefined;
  try {
    const fd = openSync(path, 'r');
    try {
      const head = new Uint8Array(1);
      first = readSync(fd, head, 0, 1, 0) === 1 ? head[0] : undefined;
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw ioError(path, err);
  }
  if (first === 0x80) return parsedFromSnapshot(readColumnarSnapshot(path));
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw ioError(path, err);
  }
  return parseSnapshot(parseJsonSnapshot(path, bytes));
}
