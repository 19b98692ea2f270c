/**
 * A file read into the report's data without Node: what `memscope report FILE` embeds, made by the
 * same readers and report builders from a Blob (a File dropped on the viewer or picked with its
 * button). The file is told apart by content exactly as `memscope report` does
 * (src/cli/commands/report.ts, src/torch/open-node.ts), refused in the same words, and read in
 * pieces sliced from the Blob (inflated by `DecompressionStream` when gzipped): a pickle's bytes
 * are never held whole, only the snapshot reader's 8 MiB piece (src/torch/snapshot-stream.ts), and a
 * capture is parsed line by line as its pieces arrive (CaptureParser).
 *
 * Web APIs only (Blob, ReadableStream, TextDecoder, DecompressionStream), so it runs in the browser
 * and, for tests, in Node 20, which has them too.
 */
import { MemscopeError } from '../core/errors.js';
import { describeContent, inFile, isCaptureDescription } from '../core/file-content.js';
import { looksLikeCapture, readCaptureChunks } from '../capture/reader.js';
import { defaultGunzipLimit, gunzipLimitError, gzipTruncatedError, isGzip, isTruncatedGzipMessage } from '../core/gzip.js';
import { looksLike, looksLikeTextPickle, readJsonTraceChunks, startsLikeJson, textPickleRefusal } from '../torch/memory-file-stream.js';
import { readSnapshotStream } from '../torch/snapshot-stream.js';
import { looksLikeJsonSnapshot, readJsonSnapshotChunks } from '../torch/snapshot-json.js';
import { captureToReport, DEFAULT_CAPS, type ReportCaps, type ReportData } from './report-data.js';
import { snapshotToReport, traceToReport } from './torch-report.js';

/** Where reading a file is, for a progress line. */
export interface OpenProgress {
  /** `reading`: bytes of the file read so far (compressed bytes for gzip); `building`: the file is read, the report is being made. */
  readonly phase: 'reading' | 'building';
  readonly bytesRead: number;
  readonly totalBytes: number;
}

export interface OpenFileOptions {
  /** The report's caps; `memscope report`'s defaults unless given. */
  readonly caps?: ReportCaps;
  readonly onProgress?: (p: OpenProgress) => void;
  /** Most bytes a gzipped file may inflate to (default: defaultGunzipLimit of its size, as the CLI). */
  readonly maxDecompressedBytes?: number;
  /** Bytes of the file read at a time (default 4 MiB). */
  readonly pieceBytes?: number;
}

/** Bytes of the file read at a time: small beside the snapshot reader's 8 MiB piece, few reads for a gigabyte. */
const DEFAULT_PIECE_BYTES = 4 << 20;

/** Enough of the start of a file to tell what it is and to quote it in a refusal (as the CLI). */
const SNIFF_BYTES = 4096;

/** A Blob's bytes, chunk by chunk, through a reader released at the end or when the caller stops. */
async function* streamChunks(stream: ReadableStream<Uint8Array>): AsyncGenerator<Uint8Array> {
  const reader = stream.getReader();
  let finished = false;
  try {
    for (;;) {
      const next = await reader.read();
      if (next.done) {
        finished = true;
        return;
      }
      yield next.value;
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/** The file's content as it is read: the raw bytes, or the inflated ones for gzip. */
class BlobContent {
  constructor(
    private readonly blob: Blob,
    private readonly name: string,
    private readonly gz: boolean,
    private readonly options: OpenFileOptions,
  ) {}

  /**
   * The raw bytes in pieces of `pieceBytes`, each read by slicing the Blob: how much of the file is
   * held at a time does not depend on how a browser chunks `Blob.stream()` (an in-memory Blob may
   * come as one chunk). Counted for the progress line.
   */
  private raw(): ReadableStream<Uint8Array> {
    const blob = this.blob;
    const total = blob.size;
    const piece = Math.max(1, this.options.pieceBytes ?? DEFAULT_PIECE_BYTES);
    const onProgress = this.options.onProgress;
    let at = 0;
    return new ReadableStream<Uint8Array>(
      {
        pull: async (out) => {
          if (at >= total) {
            out.close();
            return;
          }
          const end = Math.min(total, at + piece);
          const bytes = new Uint8Array(await blob.slice(at, end).arrayBuffer());
          at = end;
          onProgress?.({ phase: 'reading', bytesRead: at, totalBytes: total });
          out.enqueue(bytes);
        },
      },
      { highWaterMark: 0 },
    );
  }

  /** A fresh pass over the content (the snapshot reader may need a second one). */
  async *chunks(): AsyncGenerator<Uint8Array> {
    if (!this.gz) {
      yield* streamChunks(this.raw());
      return;
    }
    const limit = this.options.maxDecompressedBytes ?? defaultGunzipLimit(this.blob.size);
    const inflating = this.raw().pipeThrough(new DecompressionStream('gzip') as unknown as TransformStream<Uint8Array, Uint8Array>);
    let inflated = 0;
    const chunks = streamChunks(inflating);
    for (;;) {
      let next: IteratorResult<Uint8Array>;
      try {
        next = await chunks.next();
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        if (isTruncatedGzipMessage(message)) throw gzipTruncatedError(this.name, message, err);
        throw new MemscopeError('bad-gzip', `${this.name}: corrupt or truncated gzip data (${err instanceof Error ? err.message : String(err)})`, { cause: err });
      }
      if (next.done) return;
      inflated += next.value.length;
      if (inflated > limit) {
        await chunks.return(undefined);
        throw gunzipLimitError(this.name, limit, this.blob.size);
      }
      yield next.value;
    }
  }

  /** The first `length` bytes of the content (fewer if it is shorter). */
  async head(length: number): Promise<Uint8Array> {
    if (!this.gz) return new Uint8Array(await this.blob.slice(0, length).arrayBuffer());
    const out = new Uint8Array(length);
    let have = 0;
    const chunks = this.chunks();
    try {
      for (;;) {
        if (have >= length) break;
        const next = await chunks.next();
        if (next.done) break;
        const n = Math.min(next.value.length, length - have);
        out.set(next.value.subarray(0, n), have);
        have += n;
      }
    } catch (err) {
      // The head of a file cut short is its head: whether the cut matters is its reader's call.
      if (!(err instanceof MemscopeError && err.code === 'gzip-truncated')) throw err;
    } finally {
      await chunks.return(undefined);
    }
    return out.subarray(0, have);
  }
}

/** Lets the page draw (the progress line) before a long synchronous step. */
function nextTask(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}

/**
 * Reads `blob` (named `name` in every message) into report data: a memscope capture, a PyTorch
 * memory snapshot (a pickle of protocol 2 or later, memscope's own allocator snapshots included),
 * a Kineto trace or export_memory_timeline JSON, each optionally gzipped. Bad
 * input is a MemscopeError worded as `memscope report` words it.
 */
export async function reportDataFromBlob(blob: Blob, name: string, options: OpenFileOptions = {}): Promise<ReportData> {
  const caps = options.caps ?? DEFAULT_CAPS;
  const building = async (): Promise<void> => {
    options.onProgress?.({ phase: 'building', bytesRead: blob.size, totalBytes: blob.size });
    await nextTask();
  };
  const start = await new BlobContent(blob, name, false, {}).head(SNIFF_BYTES);
  if (start.length === 0) throw new MemscopeError('empty-file', `${name}: the file is empty`);
  const looks = describeContent(start);
  // Pickles, gzip and JSON go to the readers, which name what they find inside.
  if (!(start[0] === 0x80 || looks === 'gzip data' || looks.includes('JSON') || isCaptureDescription(looks))) {
    throw new MemscopeError('not-a-report-input', `${name}: not a memscope capture, PyTorch memory snapshot or Kineto trace: looks like ${looks}`);
  }
  const gz = isGzip(start);
  const content = new BlobContent(blob, name, gz, options);
  const head = gz ? await content.head(SNIFF_BYTES) : start;
  if (head.length === 0) throw new MemscopeError('empty-file', `${name}: the file is empty once decompressed`);
  if (looksLikeCapture(new TextDecoder('utf-8', { ignoreBOM: true }).decode(head))) {
    const capture = await readCaptureChunks(content.chunks(), name);
    await building();
    return captureToReport(capture, name, caps);
  }
  if (looksLikeTextPickle(new TextDecoder('latin1').decode(head.subarray(0, 64)))) throw textPickleRefusal(name);
  const json = head[0] !== 0x80 && startsLikeJson(head) && looksLikeJsonSnapshot(new TextDecoder('utf-8').decode(head));
  if (head[0] === 0x80 || json) {
    let snapshot;
    try {
      snapshot = json ? await readJsonSnapshotChunks(content.chunks(), name) : await readSnapshotStream(() => content.chunks());
    } catch (err) {
      throw inFile(name, err);
    }
    await building();
    return snapshotToReport(snapshot, name, caps);
  }
  const headLooks = describeContent(head);
  if (!startsLikeJson(head) || isCaptureDescription(headLooks)) {
    throw new MemscopeError('not-a-memory-file', `${name}: not a PyTorch memory snapshot or Kineto trace: ${looksLike(headLooks)}`);
  }
  let trace;
  try {
    trace = await readJsonTraceChunks(content.chunks(), name);
  } catch (err) {
    throw inFile(name, err);
  }
  await building();
  return traceToReport(trace, name, caps);
}

/** The one line the page shows for a file it cannot read: what the CLI prints on stderr. */
export function errorLine(err: unknown): string {
  if (err instanceof MemscopeError) return `memscope: ${err.message}`;
  const message = err instanceof Error ? err.message : String(err);
  return `memscope: internal error: ${message.split('\n')[0]}`;
}
