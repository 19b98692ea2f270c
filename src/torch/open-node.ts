/**
 * Opens any PyTorch memory file memscope reads, by content rather than name:
 * a pickled CUDA memory snapshot (`_dump_snapshot`), a Kineto chrome trace
 * with `[memory]` events, or `export_memory_timeline` JSON — each optionally
 * gzipped. Used by the analysis commands (summary, stats, trace, plot, …). Every refusal
 * and every error found while parsing starts with the file's name (src/core/input-file.ts).
 */
import { MemscopeError } from '../core/errors.js';
import { describeContent, inFile, isCaptureDescription } from '../core/input-file.js';
import { contentHead, fileChunks, type FileReadOptions } from '../core/file-chunks-node.js';
import { readJsonTraceFile } from './chrome-trace-node.js';
import { looksLike, looksLikeTextPickle, startsLikeJson, textPickleRefusal } from './memory-file-stream.js';
import type { MemoryTrace } from './memory-trace.js';
import { readSnapshotFile } from './snapshot-node.js';
import { readSnapshotStream } from './snapshot-stream.js';
import { looksLikeJsonSnapshot, readJsonSnapshotChunks } from './snapshot-json.js';
import type { MemorySnapshot } from './snapshot.js';

export type MemoryFile =
  | { readonly kind: 'snapshot'; readonly path: string; readonly snapshot: MemorySnapshot }
  | { readonly kind: 'trace'; readonly path: string; readonly trace: MemoryTrace };

/** `onProgress`, and `maxDecompressedBytes` for gzipped files (see FileReadOptions). */
export type OpenOptions = FileReadOptions;

/** Pickle protocol 2+ starts with the PROTO opcode. */
const PROTO = 0x80;

/** Enough of the start of a file to tell what it is and to quote it in a refusal. */
const SNIFF_BYTES = 4096;

/** The file's first bytes after any gzip layer, and whether there was one; old text pickles refused. */
async function memoryFileHead(path: string): Promise<{ head: Uint8Array; gz: boolean }> {
  const { head, gz } = await contentHead(path, SNIFF_BYTES);
  // Old pickles are named as such, with how to re-save them, before any other refusal.
  if (looksLikeTextPickle(new TextDecoder('latin1').decode(head.subarray(0, 64)))) throw textPickleRefusal(path);
  return { head, gz };
}

/** Whether a file's first bytes are a snapshot saved as JSON (snapshot-json.ts). */
function isJsonSnapshot(head: Uint8Array): boolean {
  return startsLikeJson(head) && looksLikeJsonSnapshot(new TextDecoder('utf-8').decode(head));
}

async function readSnapshotContent(path: string, gz: boolean, options: OpenOptions, json = false): Promise<MemorySnapshot> {
  const onProgress = options.onProgress ? (bytesRead: number, totalBytes: number) => options.onProgress!({ bytesRead, totalBytes }) : undefined;
  try {
    if (json) return await readJsonSnapshotChunks(fileChunks(path, options), path);
    // Plain files go through readSnapshotFile, which reads big ones in pieces instead of holding
    // (and copying) the whole file; gzip has no random access, so its inflated chunks are read as
    // they come, one piece at a time (fileChunks reports progress and applies the gunzip limit).
    return gz ? await readSnapshotStream(() => fileChunks(path, options)) : readSnapshotFile(path, { onProgress });
  } catch (err) {
    throw inFile(path, err);
  }
}

/**
 * Opens a snapshot or a trace, told apart by content. Anything else is refused before parsing,
 * with what the file looks like instead (`notes.txt: not a PyTorch memory snapshot or Kineto
 * trace: looks like text ("hello")`).
 */
export async function openMemoryFile(path: string, options: OpenOptions = {}): Promise<MemoryFile> {
  const { head, gz } = await memoryFileHead(path);
  if (head[0] === PROTO || isJsonSnapshot(head)) return { kind: 'snapshot', path, snapshot: await readSnapshotContent(path, gz, options, head[0] !== PROTO) };
  const looks = describeContent(head);
  if (!startsLikeJson(head) || isCaptureDescription(looks)) {
    throw new MemscopeError('not-a-memory-file', `${path}: not a PyTorch memory snapshot or Kineto trace: ${looksLike(looks)}`);
  }
  try {
    return { kind: 'trace', path, trace: await readJsonTraceFile(path, options) };
  } catch (err) {
    throw inFile(path, err);
  }
}

/**
 * Opens a file that must be a snapshot (stats, segments, memory, compare). Anything else is
 * refused from its first bytes, without parsing it: `trace.json.gz: not a PyTorch memory
 * snapshot: looks like a Kineto trace (JSON); \`memscope stats\` needs …`.
 */
export async function openSnapshotFile(path: string, verb: string, options: OpenOptions = {}): Promise<MemorySnapshot> {
  const { head, gz } = await memoryFileHead(path);
  if (head[0] !== PROTO && !isJsonSnapshot(head)) {
    throw new MemscopeError(
      'needs-snapshot',
      `${path}: not a PyTorch memory snapshot: ${looksLike(describeContent(head))}; \`memscope ${verb}\` needs a torch.cuda.memory._dump_snapshot pickle`,
    );
  }
  return readSnapshotContent(path, gz, options, head[0] !== PROTO);
}
