/**
 * Traces recorded with `_record_memory_history(skip_actions=[...])` (PyTorch 2.9+): the skipped
 * actions never reach `device_traces`. Every reader of a trace takes a free as two entries —
 * `free_requested` (the block leaves allocated memory) then `free_completed` (it leaves active
 * memory, once the streams that used it are done) — so a trace with one of them skipped would
 * count frees that never end, or never begin. A trace with one half of its frees and none of the
 * other, which frees an allocation it kept, gets the missing half back: the entry PyTorch would
 * have written, next to the one it did. Which actions a trace skipped is not in the file; this is
 * the only reading of such a trace in which memory adds up.
 */
import { traceTableOf, type BlockTable, type Segment, type TraceTable } from './snapshot.js';

const FREE_REQUESTED = 'free_requested';
const FREE_COMPLETED = 'free_completed';

export interface CompletedFrees {
  readonly traces: TraceTable[];
  readonly warnings: string[];
}

/**
 * The traces with the missing half of each free added (entries of other traces unchanged), and a
 * warning per trace that got any. `pendingAtEnd(device)` gives the addresses of the device's
 * blocks still pending their free in the snapshot (`active_pending_free`): a `free_requested` of
 * one of those, the last of its address, really had no `free_completed` yet.
 */
export function completeSkippedFrees(traces: readonly TraceTable[], actionNames: readonly string[], pendingAtEnd: (device: number) => ReadonlySet<number>): CompletedFrees {
  const requested = actionNames.indexOf(FREE_REQUESTED);
  const completed = actionNames.indexOf(FREE_COMPLETED);
  const warnings: string[] = [];
  const out = traces.map((t) => {
    let nRequested = 0;
    let nCompleted = 0;
    for (let i = 0; i < t.count; i++) {
      const a = t.action[i];
      if (a === requested) nRequested++;
      else if (a === completed) nCompleted++;
    }
    if (nRequested > 0 && nCompleted === 0 && freesARetainedAlloc(t, requested, actionNames.indexOf('alloc'))) {
      // Only a free_requested of a block still pending at the end, the last one of its address, had no completion.
      const pending = pendingAtEnd(t.device);
      const lastRequestOf = new Map<number, number>();
      for (let i = 0; i < t.count; i++) if (t.action[i] === requested) lastRequestOf.set(t.addr[i]!, i);
      const rows: number[] = [];
      const actions: number[] = [];
      let added = 0;
      for (let i = 0; i < t.count; i++) {
        rows.push(i);
        actions.push(t.action[i]!);
        if (t.action[i] === requested && !(pending.has(t.addr[i]!) && lastRequestOf.get(t.addr[i]!) === i)) {
          rows.push(i);
          actions.push(completed);
          added++;
        }
      }
      if (added === 0) return t;
      warnings.push(
        `device_traces[${t.device}]: no free_completed entry (recorded with skip_actions including "free_completed"): each free_requested of a block not pending at the end is taken as completed at once (${added.toLocaleString('en-US')} added; event numbers count them)`,
      );
      return gather(t, rows, actions);
    }
    if (nCompleted > 0 && nRequested === 0 && freesARetainedAlloc(t, completed, actionNames.indexOf('alloc'))) {
      const rows: number[] = [];
      const actions: number[] = [];
      for (let i = 0; i < t.count; i++) {
        if (t.action[i] === completed) {
          rows.push(i);
          actions.push(requested);
        }
        rows.push(i);
        actions.push(t.action[i]!);
      }
      warnings.push(
        `device_traces[${t.device}]: no free_requested entry (recorded with skip_actions including "free_requested"): a free_requested is taken to come just before each free_completed (${nCompleted.toLocaleString('en-US')} added; event numbers count them)`,
      );
      return gather(t, rows, actions);
    }
    return t;
  });
  return { traces: out, warnings };
}

/**
 * Whether an entry of action `free` frees an address the trace allocated before it: the evidence
 * that the other half of the free was not recorded. The allocator's ring buffer keeps the newest
 * entries, so a trace may begin with completions whose requests and allocations it dropped; but a
 * completion of an allocation it kept had its request kept too (the request comes between them),
 * and a request of one it kept has its completion after it, kept too unless still pending.
 */
function freesARetainedAlloc(t: TraceTable, free: number, alloc: number): boolean {
  const allocated = new Set<number>();
  for (let i = 0; i < t.count; i++) {
    const a = t.action[i];
    if (a === alloc) allocated.add(t.addr[i]!);
    else if (a === free && allocated.has(t.addr[i]!)) return true;
  }
  return false;
}

/** `t`'s rows `rows` in order (a row may repeat), with the action codes `actions`. */
function gather(t: TraceTable, rows: readonly number[], actions: readonly number[]): TraceTable {
  return traceTableOf(
    t.device,
    rows.length,
    Uint8Array.from(actions),
    t,
    (c) => Float64Array.from(rows, (r) => c[r]!),
    (c) => Int32Array.from(rows, (r) => c[r]!),
  );
}

/** Addresses of the blocks of each device pending their free (`active_pending_free`) in the snapshot. */
export function pendingBlockAddresses(segments: readonly Segment[], blocks: BlockTable, stateNames: readonly string[]): (device: number) => ReadonlySet<number> {
  const pendingState = stateNames.indexOf('active_pending_free');
  const byDevice = new Map<number, Set<number>>();
  if (pendingState >= 0) {
    for (const s of segments) {
      for (let b = s.firstBlock; b < s.firstBlock + s.blockCount; b++) {
        if (blocks.state[b] !== pendingState) continue;
        let set = byDevice.get(s.device);
        if (!set) byDevice.set(s.device, (set = new Set()));
        set.add(blocks.address[b]!);
      }
    }
  }
  const none = new Set<number>();
  return (device) => byDevice.get(device) ?? none;
}
