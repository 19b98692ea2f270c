/**
 * A memory snapshot saved as JSON (`json.dump(torch.cuda.memory._snapshot(), f)`, or memscope's
 * own allocator snapshot stringified): the same dict as the pickle, read into the same model by the
 * same assembler, so every verb and the viewer take it as they take the pickle.
 */
import { MemscopeError } from '../core/errors.js';
import type { PickleValue } from './pickle/reader.js';
import { normaliseSnapshot } from './snapshot-decoder.js';
import type { MemorySnapshot } from './snapshot.js';

/**
 * Whether a JSON file starts like a snapshot: an object whose first key is one a snapshot has
 * (`json.dump` keeps PyTorch's order, segments first; `sort_keys` puts allocator_settings,
 * device_traces or external_annotations first).
 */
export function looksLikeJsonSnapshot(head: string): boolean {
  return /^\uFEFF?\s*\{\s*"(segments|device_traces|allocator_settings|external_annotations)"\s*:/.test(head);
}

/** JSON as the pickle reader gives a value: objects as Maps, arrays as lists. */
function asPickleValue(v: unknown): PickleValue {
  if (Array.isArray(v)) return v.map(asPickleValue);
  if (v !== null && typeof v === 'object') {
    const m = new Map<PickleValue, PickleValue>();
    for (const [k, x] of Object.entries(v)) m.set(k, asPickleValue(x));
    return m;
  }
  return v as PickleValue;
}

/** The longest string the engine makes (V8: 2^29 − 24 characters). */
const MAX_JSON_CHARS = (1 << 29) - 24;

/** Reads a snapshot from its JSON bytes in chunks (a file's, inflated if gzipped, or a dropped Blob's). */
export async function readJsonSnapshotChunks(chunks: AsyncIterable<Uint8Array>, path: string): Promise<MemorySnapshot> {
  const decoder = new TextDecoder('utf-8');
  const parts: string[] = [];
  let length = 0;
  for await (const chunk of chunks) {
    const text = decoder.decode(chunk, { stream: true });
    length += text.length;
    if (length > MAX_JSON_CHARS) {
      throw new MemscopeError('too-large', `${path}: a JSON snapshot longer than ${MAX_JSON_CHARS.toLocaleString('en-US')} characters, more than one string can hold; save it as a pickle (torch.cuda.memory._dump_snapshot) to read it`);
    }
    parts.push(text);
  }
  parts.push(decoder.decode());
  return readJsonSnapshot(parts.join(''), path);
}

/** Reads a snapshot from its JSON text; `path` names the file in every error. */
export function readJsonSnapshot(text: string, path: string): MemorySnapshot {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    if (err instanceof RangeError) throw new MemscopeError('bad-snapshot', `${path}: JSON nested too deep to read`);
    throw new MemscopeError('bad-snapshot', `${path}: not valid JSON (${(err as Error).message})`);
  }
  let snapshot: PickleValue;
  try {
    snapshot = asPickleValue(value);
  } catch (err) {
    if (err instanceof RangeError) throw new MemscopeError('bad-snapshot', `${path}: JSON nested too deep to read`);
    throw err;
  }
  return normaliseSnapshot(snapshot);
}
