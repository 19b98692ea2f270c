import { readFileSync } from 'node:fs';
import { MemscopeError } from '../core/errors.js';
import { readPickle, toPlain } from '../torch/pickle/reader.js';

/** Reads a snapshot file (pickle, or JSON) as plain objects. */
export function readSnapshotFile(path: string): unknown {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(readFileSync(path));
  } catch (err) {
    throw new MemscopeError('io', `cannot read ${path}: ${(err as Error).message}`);
  }
  if (bytes.length > 0 && bytes[0] === 0x80) return toPlain(readPickle(bytes));
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
