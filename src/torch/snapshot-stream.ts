/**
 * A snapshot read from a stream of byte chunks (a gzipped file inflating), holding one piece of
 * the inflated pickle at a time instead of all of it: the same machine and builder as
 * `readSnapshotPieces`, fed as the chunks arrive. Browser-safe (no Node imports).
 */
import { DEFAULT_PICKLE_LIMITS, type PickleLimits } from './pickle/builder.js';
import { PickleMachine } from './pickle/machine.js';
import { readPickle } from './pickle/reader.js';
import { SnapshotBuilder } from './snapshot-builder.js';
import { assemble, fallsBack, grownPieceBuffer, normaliseSnapshot, type ReadSnapshotPiecesOptions } from './snapshot-decoder.js';
import { SnapshotTables } from './snapshot-tables.js';
import type { MemorySnapshot } from './snapshot.js';

/** Bytes of the inflated pickle held at a time unless told otherwise (as readSnapshotPieces). */
const DEFAULT_PIECE_BYTES = 8 << 20;

/**
 * Reads a pickled snapshot from the chunks `open()` yields. `open` may be called a second time:
 * a file the fast path does not model (a recognised dict modified later, which no pickler writes),
 * or a fault inside the fast path, is read again, whole, by the generic reader. The stream's length is known only at its end, so a
 * FRAME longer than the rest of the data is caught when it lies in the last piece.
 */
export async function readSnapshotStream(open: () => AsyncIterable<Uint8Array>, options: ReadSnapshotPiecesOptions = {}): Promise<MemorySnapshot> {
  const limits: PickleLimits = { ...DEFAULT_PICKLE_LIMITS, ...options.limits };
  const tables = new SnapshotTables(1 << 16);
  const machine = new PickleMachine(new SnapshotBuilder(tables, 0, limits.maxContainerItems), limits);
  let buf = new Uint8Array(Math.max(64, options.pieceBytes ?? DEFAULT_PIECE_BYTES));
  let have = 0;
  let fileOffset = 0;
  const chunks = open()[Symbol.asyncIterator]();
  let carry: Uint8Array | null = null; // the part of the last chunk that did not fit in `buf`
  let ended = false;
  try {
    for (;;) {
      while (have < buf.length && !ended) {
        if (carry === null || carry.length === 0) {
          const next = await chunks.next();
          if (next.done) {
            ended = true;
            break;
          }
          carry = next.value;
        }
        const n = Math.min(carry.length, buf.length - have);
        buf.set(carry.subarray(0, n), have);
        have += n;
        carry = carry.subarray(n);
      }
      const final = ended && (carry === null || carry.length === 0);
      const run = machine.run(buf.subarray(0, have), fileOffset, final, final ? fileOffset + have : Infinity);
      if (run.done) {
        const root = run.value;
        await chunks.return?.();
        return assemble(root, tables);
      }
      if (run.consumed === 0) {
        buf = grownPieceBuffer(buf, have);
        continue;
      }
      buf.copyWithin(0, run.consumed, have);
      have -= run.consumed;
      fileOffset += run.consumed;
    }
  } catch (e) {
    await chunks.return?.();
    if (!fallsBack(e)) throw e;
  }
  // As readSnapshot: something the fast path does not model, or a fault of its own; read the whole
  // stream generically.
  const parts: Uint8Array[] = [];
  let length = 0;
  for await (const chunk of open()) {
    parts.push(chunk);
    length += chunk.length;
  }
  const all = new Uint8Array(length);
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.length;
  }
  return normaliseSnapshot(readPickle(all, limits));
}
