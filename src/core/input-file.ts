/**
 * One wording, for every verb and reader, of "this input file cannot be used": the file's name,
 * then the problem (`some/dir: is a directory`, `notes.txt: not a PyTorch memory snapshot: looks
 * like text ("hello")`). Readers call these at the point where they open a file, so a problem
 * found later while parsing also arrives as `FILE: <where inside>: <what>`.
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { isMemscopeError, MemscopeError } from './errors.js';

/** What an operating-system error code means for a file someone asked memscope to read. */
function problemOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | null)?.code;
  switch (code) {
    case 'ENOENT':
      return 'no such file';
    case 'EISDIR':
      return 'is a directory';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOTDIR':
      return 'no such file (a part of the path is not a directory)';
    case 'ELOOP':
      return 'too many symbolic links';
    case 'ENAMETOOLONG':
      return 'the name is too long';
    default:
      return `cannot read it (${code ?? (err instanceof Error ? err.message : String(err))})`;
  }
}

/** `PATH: <problem>` for an error from opening, stating or reading `path`. A MemscopeError passes through. */
export function unreadableFile(path: string, err: unknown): MemscopeError {
  if (isMemscopeError(err)) return err;
  return new MemscopeError('unreadable-file', `${path}: ${problemOf(err)}`, { cause: err });
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

/**
 * Gives an error raised while parsing `path` the file's name in front, unless its message already
 * starts with it; errors that are not memscope's (bugs) pass through untouched.
 */
export function inFile(path: string, err: unknown): unknown {
  if (!isMemscopeError(err) || err.message.startsWith(`${path}:`)) return err;
  return new MemscopeError(err.code, `${path}: ${err.message}`, { cause: err });
}

/** The capture header's `format` value (src/capture/types.ts), spelled here so core needs no capture module. */
const CAPTURE_MARK = '"memscope-capture"';

/** A short, printable quote of the start of a text file. */
function quoteStart(text: string): string {
  const line = text.split(/\r?\n/).find((l) => l.trim() !== '') ?? '';
  const cut = line.length > 40 ? `${line.slice(0, 40)}…` : line;
  return JSON.stringify(cut.trim());
}

/**
 * What a file's first bytes (decompressed, for gzip) look like, as a phrase for refusals:
 * "a pickle", "a memscope capture (written by memscope run)", "a Kineto trace (JSON)",
 * "JSON", "text ("…")", "binary data", "an empty file".
 */
export function describeContent(head: Uint8Array): string {
  if (head.length === 0) return 'an empty file';
  if (head[0] === 0x80) return 'a pickle';
  if (head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b) return 'gzip data';
  let text: string;
  try {
    // A multi-byte character cut by the end of the head is not a reason to call the file binary.
    text = new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, Math.max(0, head.length - 3)));
    text += new TextDecoder('utf-8').decode(head.subarray(Math.max(0, head.length - 3)));
  } catch {
    return 'binary data';
  }
  // eslint-disable-next-line no-control-regex
  const controls = text.match(/[\x00-\x08\x0e-\x1f]/g)?.length ?? 0;
  if (controls > text.length / 100 + 1) return 'binary data';
  const start = text.trimStart();
  if (start.startsWith('{') && start.includes(CAPTURE_MARK)) return 'a memscope capture (written by memscope run)';
  if (start.startsWith('{') && start.includes('"traceEvents"')) return 'a Kineto trace (JSON)';
  if (start.startsWith('[[')) return 'export_memory_timeline JSON';
  if (start.startsWith('{') || start.startsWith('[')) return 'JSON';
  return `text (${quoteStart(start)})`;
}

/** Whether `describeContent` found a memscope capture. */
export function isCaptureDescription(description: string): boolean {
  return description.startsWith('a memscope capture');
}
