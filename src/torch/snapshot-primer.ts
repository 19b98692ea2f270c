/**
 * A small synthetic snapshot that the snapshot readers read once per process before a large file,
 * so that V8 has met every path of the reader before it optimises it.
 *
 * Why: in a fresh process V8 optimises the reader's hot functions from what they have met so far.
 * A big PyTorch snapshot meets new paths late — frame lists whose memo indices pass 256
 * (LONG_BINGET), the first trace entry after thousands of blocks, a piece boundary, a column
 * growing, a 7-byte LONG1 — and each one throws optimised code away ("insufficient type
 * feedback") and runs the reader in slower code until V8 has compiled it again: 17 times on the
 * 100 MB bench file without the primer, twice with it (both in the last loops of the assembler).
 * Reading it costs a few milliseconds; the read takes 6–8 % fewer instructions (docs/PICKLE.md,
 * "The primer").
 *
 * The bytes are those of snapshot-primer-source.ts, written out in snapshot-primer-data.ts.
 */
import { PRIMER_SNAPSHOT_BASE64 } from './snapshot-primer-data.js';

/** The primer's bytes, decoded from base64 (browser-safe: `atob`, no Buffer). */
export function primerSnapshotBytes(): Uint8Array {
  const text = atob(PRIMER_SNAPSHOT_BASE64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}
