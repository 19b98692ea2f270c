/**
 * What a file's first bytes look like, and errors named by their file: the platform-free half of
 * src/core/input-file.ts, shared by the Node readers and the browser viewer reading a dropped file.
 */
import { isMemscopeError, MemscopeError } from './errors.js';

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
    // A multi-byte character cut by the end of the head is not a reason to call the file binary:
    // the strict part ends where the last character (of at most four bytes) begins.
    let cut = head.length - 1;
    for (let k = 0; k < 3 && cut > 0 && (head[cut]! & 0xc0) === 0x80; k++) cut--;
    text = new TextDecoder('utf-8', { fatal: true }).decode(head.subarray(0, cut));
    text += new TextDecoder('utf-8').decode(head.subarray(cut));
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
