import { closeSync, openSync, readSync } from 'node:fs';
import { describeContent, isCaptureDescription, requireReadableFile, unreadableFile } from '../core/input-file.js';
import { MemscopeError } from '../core/errors.js';
import { CaptureParser, type Capture } from './reader.js';

/** Bytes read at a time: the file is never held whole, nor as one string (see CaptureParser). */
const PIECE_BYTES = 8 << 20;
/** Enough of the start of a file to tell what it is (as every verb). */
const SNIFF_BYTES = 4096;

/**
 * Reads and parses a capture file, in pieces. A missing, unreadable or empty file, or one that is
 * something else (a snapshot, a trace, text), is a MemscopeError in the wording every verb uses
 * (src/core/input-file.ts); damage inside a capture is CaptureParser's, naming the line.
 */
export function readCaptureFile(path: string, pieceBytes = PIECE_BYTES): Capture {
  requireReadableFile(path);
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw unreadableFile(path, err);
  }
  try {
    let buffer = Buffer.alloc(Math.max(SNIFF_BYTES, pieceBytes));
    const read = (at: number, length: number, position: number | null = null): number => {
      try {
        return readSync(fd, buffer, at, length, position);
      } catch (err) {
        throw unreadableFile(path, err);
      }
    };
    const sniffed = read(0, SNIFF_BYTES, 0);
    const looks = describeContent(buffer.subarray(0, sniffed));
    // Plain JSON of unknown shape goes to the parser, which names what its first line lacks.
    if (!isCaptureDescription(looks) && looks !== 'JSON') {
      const what = sniffed === 0 ? 'the file is empty' : `looks like ${looks}`;
      throw new MemscopeError('not-a-capture', `${path}: not a memscope capture (\`memscope run\` writes them): ${what}`);
    }
    // Each piece is decoded up to its last line end and the bytes after it carried to the next: a
    // line end (0x0a) is never part of a UTF-8 sequence, so no character is cut, and Buffer's
    // decoder is many times faster than a streaming TextDecoder. As Buffer#toString of the whole
    // file: a byte-order mark stays and reaches the parser; bad bytes become U+FFFD.
    const piece = Math.max(1, pieceBytes);
    const parser = new CaptureParser(path);
    let carried = 0;
    let position = 0;
    for (;;) {
      // A line longer than the buffer: grow it, as a decoded piece must end with a whole line.
      if (buffer.length - carried < piece) buffer = Buffer.concat([buffer.subarray(0, carried), Buffer.alloc(Math.max(piece, buffer.length))]);
      const n = read(carried, piece, position);
      position += n;
      const have = carried + n;
      if (n === 0) {
        if (have > 0) parser.push(buffer.toString('utf8', 0, have));
        return parser.end();
      }
      // Only the bytes just read can hold a line end: the carried ones have none.
      const nl = buffer.subarray(carried, have).lastIndexOf(0x0a);
      const cut = nl < 0 ? 0 : carried + nl + 1;
      if (cut > 0) {
        parser.push(buffer.toString('utf8', 0, cut));
        buffer.copy(buffer, 0, cut, have);
      }
      carried = have - cut;
    }
  } finally {
    closeSync(fd);
  }
}
