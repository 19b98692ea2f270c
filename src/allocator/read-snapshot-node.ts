import { readFileSync } from 'node:fs';
import { MemscopeError } from '../core/errors.js';
import { describeContent, inFile, isCaptureDescription, readHeadSync, requireReadableFile, unreadableFile } from '../core/input-file.js';
import { readPickle, toPlain } from '../torch/pickle/reader.js';
import { readSnapshotFile as readColumnarSnapshot } from '../torch/snapshot-node.js';
import { parsedFromSnapshot, parseSnapshot, type ParsedSnapshot } from './replay.js';

function notASnapshot(path: string, bytes: Uint8Array): MemscopeError {
  const looks = describeContent(bytes.subarray(0, 4096));
  return new MemscopeError('bad-snapshot', `${path}: not a PyTorch memory snapshot: ${isCaptureDescription(looks) ? looks : `looks like ${looks}`}`);
}

function parseJsonSnapshot(path: string, bytes: Uint8Array): unknown {
  const text = new TextDecoder().decode(bytes).trimStart();
  const looks = describeContent(bytes.subarray(0, 4096));
  if (text.startsWith('{') && !isCaptureDescription(looks)) {
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (err) {
      throw new MemscopeError('bad-snapshot', `${path}: not valid JSON (${(err as Error).message})`);
    }
    // A snapshot has "segments"; anything else (a Kineto trace, other JSON) is named as what it is.
    if (typeof value === 'object' && value !== null && !('segments' in value)) {
      const keys = Object.keys(value).slice(0, 5).map((k) => JSON.stringify(k)).join(', ');
      const what = 'traceEvents' in value ? 'looks like a Kineto trace (JSON)' : `JSON without "segments" (top-level keys: ${keys || 'none'})`;
      throw new MemscopeError('bad-snapshot', `${path}: not a PyTorch memory snapshot: ${what}`);
    }
    return value;
  }
  throw notASnapshot(path, bytes);
}

function readWhole(path: string): Uint8Array {
  requireReadableFile(path);
  try {
    return new Uint8Array(readFileSync(path));
  } catch (err) {
    throw unreadableFile(path, err);
  }
}

/** Reads a snapshot file (pickle, or JSON) as plain objects: every key the file has, frames included. */
export function readSnapshotFile(path: string): unknown {
  const bytes = readWhole(path);
  if (bytes.length === 0) throw new MemscopeError('empty-file', `${path}: the file is empty`);
  if (bytes[0] === 0x80) {
    try {
      return toPlain(readPickle(bytes));
    } catch (err) {
      throw inFile(path, err);
    }
  }
  return parseJsonSnapshot(path, bytes);
}

/**
 * Reads what `memscope replay` needs from a snapshot file. Pickles go through the columnar reader
 * (src/torch/snapshot-node.ts: fast, big files in pieces) instead of readSnapshotFile's plain
 * objects, which replay does not need (it never looks at frames) and which cost several times the
 * time and memory; JSON snapshots are parsed as before.
 */
export function readReplaySnapshot(path: string): ParsedSnapshot {
  requireReadableFile(path);
  const head = readHeadSync(path, 1);
  if (head.length === 0) throw new MemscopeError('empty-file', `${path}: the file is empty`);
  if (head[0] === 0x80) {
    try {
      return parsedFromSnapshot(readColumnarSnapshot(path));
    } catch (err) {
      throw inFile(path, err);
    }
  }
  const snapshot = parseJsonSnapshot(path, readWhole(path));
  try {
    return parseSnapshot(snapshot);
  } catch (err) {
    throw inFile(path, err);
  }
}
