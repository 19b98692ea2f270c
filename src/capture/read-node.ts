import { MemscopeError } from '../core/errors.js';
import { contentHead, fileChunks, type FileReadOptions } from '../core/file-chunks-node.js';
import { describeContent, isCaptureDescription } from '../core/input-file.js';
import { readCaptureChunks, type Capture } from './reader.js';

/** Enough of the start of a file to tell what it is (as every verb). */
const SNIFF_BYTES = 4096;

/**
 * Reads and parses a capture file, plain or gzipped, in pieces: the file is never held whole, nor
 * its text as one string (see CaptureParser). A missing, unreadable or empty file, or one that is
 * something else (a snapshot, a trace, text), is a MemscopeError in the wording every verb uses
 * (src/core/input-file.ts); damage inside a capture is CaptureParser's, naming the line.
 */
export async function readCaptureFile(path: string, options: FileReadOptions = {}): Promise<Capture> {
  const { head, gz } = await contentHead(path, SNIFF_BYTES);
  const looks = describeContent(head);
  // Plain JSON of unknown shape goes to the parser, which names what its first line lacks.
  if (!isCaptureDescription(looks) && looks !== 'JSON') {
    throw new MemscopeError('not-a-capture', `${path}: not a memscope capture (\`memscope run\` writes them): looks like ${gz ? `gzipped ${looks}` : looks}`);
  }
  return readCaptureChunks(fileChunks(path, options), path);
}
