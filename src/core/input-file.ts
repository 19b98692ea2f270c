/**
 * One wording, for every verb and reader, of "this input file cannot be used": the file's name,
 * then the problem (`some/dir: is a directory`, `notes.txt: not a PyTorch memory snapshot: looks
 * like text ("hello")`). Readers call these at the point where they open a file, so a problem
 * found later while parsing also arrives as `FILE: <where inside>: <what>`.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { isMemscopeError, MemscopeError } from './errors.js';
import { readProblem, writeProblem } from './file-problems.js';

// The platform-free half (what a file's first bytes look like, errors named by file) lives in
// file-content.ts so the browser viewer reads dropped files with the same wording.
export { describeContent, inFile, isCaptureDescription } from './file-content.js';

/** `PATH: cannot write it: <problem>` for an error from creating or writing `path`. */
export function unwritableFile(path: string, err: unknown): MemscopeError {
  return new MemscopeError('write-failed', `${path}: cannot write it: ${writeProblem(err)}`, { cause: err });
}

/** `PATH: <problem>` for an error from opening, stating or reading `path`. A MemscopeError passes through. */
export function unreadableFile(path: string, err: unknown): MemscopeError {
  if (isMemscopeError(err)) return err;
  return new MemscopeError('unreadable-file', `${path}: ${readProblem(err)}`, { cause: err });
}

/**
 * Checks that `path` is a regular file memscope may read and returns its size, or throws the
 * one-line error every verb uses: no such file, is a directory, not a regular file, permission
 * denied. Readers call it before reading so a directory is named as one instead of surfacing as
 * an EISDIR from the first read.
 */
export function requireReadableFile(path: string): number {
  let size: number;
  try {
    const st = statSync(path);
    if (st.isDirectory()) throw Object.assign(new Error('is a directory'), { code: 'EISDIR' });
    if (!st.isFile()) throw new MemscopeError('unreadable-file', `${path}: not a regular file (memscope reads files it can read twice: no pipes or devices)`);
    size = st.size;
    closeSync(openSync(path, 'r'));
  } catch (err) {
    throw unreadableFile(path, err);
  }
  return size;
}

/** The first `length` bytes of `path` (fewer if it is shorter); errors in the shared wording. */
export function readHeadSync(path: string, length: number): Uint8Array {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    throw unreadableFile(path, err);
  }
  try {
    const buf = new Uint8Array(length);
    const got = readSync(fd, buf, 0, length, 0);
    return buf.subarray(0, got);
  } catch (err) {
    throw unreadableFile(path, err);
  } finally {
    closeSync(fd);
  }
}

