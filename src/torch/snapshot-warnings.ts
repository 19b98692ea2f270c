/**
 * `MemorySnapshot.warnings`: what a reader read other than exactly as written, one line each.
 */
import { SnapshotTables } from './snapshot-tables.js';
import { KNOWN_BLOCK_STATES, KNOWN_TRACE_ACTIONS } from './pytorch-vocabulary.js';
import { stackFrameIds, type MemorySnapshot } from './snapshot.js';

const plural = (n: number, one: string, many = `${one}s`): string => `${n} ${n === 1 ? one : many}`;
/** A name from the file, quoted with its control characters escaped. */
const quoted = (s: string): string => JSON.stringify(s);

/**
 * The warnings of a model (MemorySnapshot.warnings), from the model itself and from counts both
 * paths keep alike (the fast path leaves every dict it does not recognise exactly to the
 * assembler), so that both paths give the same list.
 */
export function readWarnings(s: MemorySnapshot, t: SnapshotTables): string[] {
  const out: string[] = [];
  if (t.derivedBlockAddresses > 0) {
    out.push(`${plural(t.derivedBlockAddresses, 'block')} without an address (PyTorch 2.0 layout): each placed where the blocks before it in its segment end`);
  }
  s.traces.forEach((trace) => {
    let untimed = 0;
    for (let i = 0; i < trace.count; i++) if (Number.isNaN(trace.timeUs[i]!)) untimed++;
    if (untimed > 0) out.push(`device_traces[${trace.device}]: ${untimed} of ${plural(trace.count, 'entry', 'entries')} without time_us: their times are unknown`);
  });
  const unknownLines = unknownLineFrames(s);
  if (unknownLines > 0) out.push(`${plural(unknownLines, 'frame')} with an unknown line number (-1, or 2^64-1 as PyTorch writes CPython's -1): shown as ?`);
  if (t.framesWithOtherKeys > 0) {
    const keys = [...t.otherFrameKeys].sort().map(quoted).join(', ');
    const fx = [...t.otherFrameKeys].some((k) => k.startsWith('fx_'));
    out.push(
      `${plural(t.framesWithOtherKeys, 'frame')} with keys memscope does not show (${keys})${fx ? ', added by augment_with_fx_traces=True: the frame of the generated code is shown, not the model line it came from' : ''}`,
    );
  }
  if (t.entriesWithoutAddr > 0) out.push(`${plural(t.entriesWithoutAddr, 'trace entry', 'trace entries')} other than oom without addr: read as 0`);
  if (t.entriesWithoutSize > 0) out.push(`${plural(t.entriesWithoutSize, 'trace entry', 'trace entries')} without size: read as 0`);
  const extraActions = s.actionNames.length - KNOWN_TRACE_ACTIONS.length;
  if (extraActions > 0) {
    const counts = new Float64Array(s.actionNames.length);
    for (const trace of s.traces) for (let i = 0; i < trace.count; i++) counts[trace.action[i]!]++;
    for (let c = KNOWN_TRACE_ACTIONS.length; c < s.actionNames.length; c++) {
      out.push(`trace action ${quoted(s.actionNames[c]!)} unknown to memscope (${plural(counts[c]!, 'entry', 'entries')})`);
    }
  }
  if (s.stateNames.length > KNOWN_BLOCK_STATES.length) {
    const counts = new Float64Array(s.stateNames.length);
    for (let i = 0; i < s.blocks.count; i++) counts[s.blocks.state[i]!]++;
    for (let c = KNOWN_BLOCK_STATES.length; c < s.stateNames.length; c++) {
      if (counts[c]! > 0) out.push(`block state ${quoted(s.stateNames[c]!)} unknown to memscope (${plural(counts[c]!, 'block')})`);
    }
  }
  const keys = (what: string, names: Iterable<string>): void => {
    const list = [...names].sort();
    if (list.length > 0) out.push(`${what} with keys memscope does not read: ${list.map(quoted).join(', ')}`);
  };
  keys('top level', s.format.unknownKeys);
  keys('segments', t.otherSegmentKeys);
  keys('blocks', t.otherBlockKeys);
  keys('trace entries', t.otherTraceKeys);
  return out;
}

/** Distinct frames with line -1 on the stacks the model uses (not on stacks only the fast path met). */
function unknownLineFrames(s: MemorySnapshot): number {
  if (!s.frames.some((f) => f.line < 0)) return 0;
  const used = new Uint8Array(s.stacks.count);
  for (const seg of s.segments) used[seg.stack] = 1;
  for (let i = 0; i < s.blocks.count; i++) used[s.blocks.stack[i]!] = 1;
  for (const trace of s.traces) for (let i = 0; i < trace.count; i++) used[trace.stack[i]!] = 1;
  const seen = new Set<number>();
  for (let id = 0; id < s.stacks.count; id++) {
    if (!used[id]) continue;
    for (const f of stackFrameIds(s, id)) if (s.frames[f]!.line < 0) seen.add(f);
  }
  return seen.size;
}
