/**
 * Opens any PyTorch memory file memscope reads, by content rather than name:
 * a pickled CUDA memory snapshot (`_dump_snapshot`), a Kineto chrome trace
 * with `[memory]` events, or `export_memory_timeline` JSON — each optionally
 * gzipped. Used by the analysis commands (summary, stats, trace, plot, …).
 */
import { MemscopeError } from '../core/errors.js';
import { fileChunks, isGzip, readFileHead, readJsonTraceFile, type FileReadOptions } from './chrome-trace-node.js';
import type { MemoryTrace } from './memory-trace.js';
import { readSnapshotFile } from './snapshot-node.js';
import { readSnapshotStream } from './snapshot-stream.js';
import type { MemorySnapshot } from './snapshot.js';

export type MemoryFile =
  | { readonly kind: 'snapshot'; readonly path: string; readonly snapshot: MemorySnapshot }
  | { readonly kind: 'trace'; readonly path: string; readonly trace: MemoryTrace };

/** `onProgress`, and `maxDecompressedBytes` for gzipped files (see FileReadOptions). */
export type OpenOptions = FileReadOptions;

/** Pickle protocol 2+ starts with the PROTO opcode. */
const PROTO = 0x80;

async function firstDecompressedByte(path: string): Promise<number | undefined> {
  for await (const chunk of fileChunks(path)) {
    if (chunk.length > 0) return chunk[0];
  }
  return undefined;
}

export async function openMemoryFile(path: string, options: OpenOptions = {}): Promise<MemoryFile> {
  const head = await readFileHead(path, 2);
  if (head.length === 0) throw new MemscopeError('empty-file', `${path}: the file is empty`);
  const gz = isGzip(head);
  const first = gz ? await firstDecompressedByte(path) : head[0];
  if (first === PROTO) {
    const onProgress = options.onProgress ? (bytesRead: number, totalBytes: number) => options.onProgress!({ bytesRead, totalBytes }) : undefined;
    // Plain files go through readSnapshotFile, which reads big ones in pieces instead of holding
    // (and copying) the whole file; gzip has no random access, so its inflated chunks are read as
    // they come, one piece at a time (fileChunks reports progress and applies the gunzip limit).
    const snapshot = gz ? await readSnapshotStream(() => fileChunks(path, options)) : readSnapshotFile(path, { onProgress });
    return { kind: 'snapshot', path, snapshot };
  }
  return { kind: 'trace', path, trace: await readJsonTraceFile(path, options) };
}

/** Opens a file that must be a snapshot (segments, memory, compare). */
export async function openSnapshotFile(path: string, verb: string, options: OpenOptions = {}): Promise<MemorySnapshot> {
  const file = await openMemoryFile(path, options);
  if (file.kind !== 'snapshot') {
    throw new MemscopeError(
      'needs-snapshot',
      `${path}: \`memscope ${verb}\` needs a memory snapshot (torch.cuda.memory._dump_snapshot pickle); this is a ${file.trace.source} trace`,
    );
  }
  return file.snapshot;
}
