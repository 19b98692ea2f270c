import { readFileSync } from 'node:fs';
import { describeContent, isCaptureDescription, requireReadableFile, unreadableFile } from '../core/input-file.js';
import { MemscopeError } from '../core/errors.js';
import { parseCapture, type Capture } from './reader.js';

/**
 * Reads and parses a capture file. A missing, unreadable or empty file, or one that is something
 * else (a snapshot, a trace, text), is a MemscopeError in the wording every verb uses
 * (src/core/input-file.ts); damage inside a capture is parseCapture's, naming the line.
 */
export function readCaptureFile(path: string): Capture {
  requireReadableFile(path);
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw unreadableFile(path, err);
  }
  const looks = describeContent(bytes.subarray(0, 4096));
  // Plain JSON of unknown shape goes to parseCapture, which names what its first line lacks.
  if (!isCaptureDescription(looks) && looks !== 'JSON') {
    const what = bytes.length === 0 ? 'the file is empty' : `looks like ${looks}`;
    throw new MemscopeError('not-a-capture', `${path}: not a memscope capture (\`memscope run\` writes them): ${what}`);
  }
  return parseCapture(bytes.toString('utf8'), path);
}
