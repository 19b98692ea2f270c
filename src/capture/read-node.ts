import { readFileSync, statSync } from 'node:fs';
import { MemscopeError } from '../core/errors.js';
import { parseCapture, type Capture } from './reader.js';

/** Reads and parses a capture file; a missing or unreadable file is a MemscopeError. */
export function readCaptureFile(path: string): Capture {
  let text: string;
  try {
    if (!statSync(path).isFile()) throw new Error('not a file');
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new MemscopeError('bad-argument', `cannot read capture ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return parseCapture(text, path);
}
