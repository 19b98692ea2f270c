/**
 * PyTorch memory files read from a stream of byte chunks, with no platform API: the JSON trace
 * reader that tells a Kineto chrome trace from export_memory_timeline JSON as the text arrives,
 * the rule that recognises old text pickles (gzip has its rules in core/gzip.ts). The Node readers
 * (chrome-trace-node.ts, open-node.ts) feed it file chunks; the viewer feeds it a dropped File.
 */
import { MemscopeError } from '../core/errors.js';
import { isCaptureDescription } from '../core/file-content.js';
import { ChromeTraceReader } from './chrome-trace.js';
import type { MemoryTrace } from './memory-trace.js';
import { readMemoryTimeline } from './memory-timeline.js';

/** Whether the first character after whitespace (and a UTF-8 byte-order mark) is '{' or '['. */
export function startsLikeJson(head: Uint8Array): boolean {
  const bom = head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf ? 3 : 0;
  for (let i = bom; i < head.length; i++) {
    const b = head[i]!;
    if (b === 0x20 || b === 0x09 || b === 0x0a || b === 0x0d) continue;
    return b === 0x7b || b === 0x5b;
  }
  return false;
}

/** The end of a refusal: what the file is instead (a capture names the verbs that read it). */
export function looksLike(description: string): string {
  return isCaptureDescription(description)
    ? `${description}; read it with \`memscope leaks\` or \`memscope report\``
    : `looks like ${description}`;
}

/** What a JSON memory file is, judged from its first characters. */
export type JsonTraceKind = 'chrome-trace' | 'memory-timeline';

/** Chrome traces start `{` or `[{`; export_memory_timeline JSON starts `[[`. */
export function sniffJsonKind(text: string): JsonTraceKind | null {
  const m = /^\uFEFF?\s*([{[])\s*([{[\d-])?/.exec(text);
  if (!m) return null;
  if (m[1] === '{') return 'chrome-trace';
  if (m[2] === '{') return 'chrome-trace';
  if (m[2] === '[' ) return 'memory-timeline';
  // `[]` (no events) or `[1,…` are not memory files we know.
  return m[2] === undefined ? 'chrome-trace' : null;
}

/**
 * Whether text read from a file starts like a pickle of protocol 0 or 1 (text opcodes): what
 * `pickle.dump(obj, f, protocol=0)` or `=1` writes for a dict or list, which memscope does not
 * read. Protocol 2 and later start with the PROTO byte 0x80 and never reach the JSON readers.
 */
export function looksLikeTextPickle(text: string): boolean {
  // MARK then DICT / LIST (protocol 0: `(dp0`, `(lp0`), or EMPTY_DICT / EMPTY_LIST then a memo
  // put or MARK (protocol 1: `}q\0(`, `]q\0(`), or a GLOBAL line (`cmodule\nname\n`).
  return /^(\((d|l|t)|[}\]](q|r|\(|\.)|c[A-Za-z_][\w.]*\n[A-Za-z_])/.test(text);
}

/** The refusal of a protocol 0/1 pickle, with how to re-save it in a protocol memscope reads. */
export function textPickleRefusal(path: string): MemscopeError {
  return new MemscopeError(
    'pickle-unsupported',
    `${path}: a pickle written with protocol 0 or 1 (text opcodes), which memscope does not read; ` +
      'memory snapshots are pickles of protocol 2 or later: load it in Python and re-save it with pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)',
  );
}

function notAMemoryFile(path: string, text: string): MemscopeError {
  if (looksLikeTextPickle(text)) return textPickleRefusal(path);
  const start = JSON.stringify(text.trimStart().slice(0, 24).replace(/[^\x20-\x7e]/g, '?'));
  return new MemscopeError(
    'not-a-trace',
    `${path}: not a memory trace: expected a Kineto chrome trace (JSON object with "traceEvents") or export_memory_timeline JSON ([[times], [sizes]]), found ${start}`,
  );
}

/**
 * Reads any JSON memory trace: a Kineto chrome trace (streamed) or an
 * `export_memory_timeline` / `export_memory_timeline_raw` file (parsed whole:
 * it has one small row per timestamp, far smaller than the trace it came from).
 */
export async function readJsonTraceChunks(chunks: AsyncIterable<Uint8Array>, path: string): Promise<MemoryTrace> {
  const decoder = new TextDecoder('utf-8');
  let reader: ChromeTraceReader | null = null;
  let pending = '';
  /** Whitespace characters dropped before `pending` (error positions stay file positions). */
  let skipped = 0;
  let timelineParts: string[] | null = null;
  for await (const chunk of chunks) {
    const text = decoder.decode(chunk, { stream: true });
    if (reader) {
      reader.push(text);
      continue;
    }
    if (timelineParts) {
      timelineParts.push(text);
      continue;
    }
    // Whitespace before the first value is dropped as it comes: kept and trimmed on every chunk,
    // a file of a gigabyte of spaces took time quadratic in its length.
    if (pending.length === 0) {
      const kept = text.trimStart();
      skipped += text.length - kept.length;
      pending = kept;
    } else pending += text;
    if (pending.length < 2) continue;
    const kind = sniffJsonKind(pending);
    if (kind === 'chrome-trace') {
      reader = new ChromeTraceReader({ source: path, startOffset: skipped });
      reader.push(pending);
    } else if (kind === 'memory-timeline') {
      timelineParts = [pending];
    } else {
      throw notAMemoryFile(path, pending);
    }
    pending = '';
  }
  const tail = decoder.decode();
  if (reader) {
    reader.push(tail);
    return reader.finish();
  }
  if (timelineParts) {
    timelineParts.push(tail);
    let value: unknown;
    try {
      value = JSON.parse(timelineParts.join(''));
    } catch (err) {
      throw new MemscopeError('bad-json', `${path}: not valid JSON (${(err as Error).message})`);
    }
    return readMemoryTimeline(value, path);
  }
  pending += tail;
  if (pending.trim().length === 0) throw new MemscopeError('not-a-trace', `${path}: the file is empty`);
  const kind = sniffJsonKind(pending);
  if (kind === 'chrome-trace') {
    const r = new ChromeTraceReader({ source: path, startOffset: skipped });
    r.push(pending);
    return r.finish();
  }
  throw notAMemoryFile(path, pending);
}

