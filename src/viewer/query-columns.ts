/**
 * The query box's columns for a PyTorch snapshot's allocations (ReportDeviceMemory.facets): the
 * first user frame, stream, pool, the category inferred from the stacks, the phase and step, and
 * the moment of the device's peak. Built beside the Active Memory Timeline's columns, in the same
 * allocation order; platform-free, so a page that reads a dropped file builds them too.
 */
import { SMALL_SIZE, type Frame } from '../torch/pytorch-vocabulary.js';
import { CategoryInference, INFERRED_CATEGORIES, PHASES } from '../torch/analysis/inferred-categories.js';
import { stackFrames, type MemorySnapshot } from '../torch/snapshot.js';
import type { AllocationFacets, ReportDeviceMemory, ReportMemory, StackUserFrames, StringTable } from './report-data.js';
import { hasHistory } from './snapshot-memory.js';
import { deviceIndexOfLabel } from '../torch/device-type.js';

/** The innermost Python frame outside the torch package (site-packages/torch/… or a checkout's torch/…). */
export function firstUserFrame(frames: readonly Frame[]): Frame | null {
  for (const f of frames) if (f.filename.endsWith('.py') && !/(^|[\\/])torch[\\/]/.test(f.filename)) return f;
  return null;
}

/** "file.py:line:function" with the file's base name, `?` for an unknown line. */
export function userFrameLabel(f: Frame): string {
  return `${f.filename.split(/[\\/]/).pop()}:${f.line < 0 ? '?' : f.line}:${f.name}`;
}

/** After how many events the allocations stacked on the device reach their highest sum (the first time). */
export function peakEvents(d: Pick<ReportDeviceMemory, 'start' | 'end' | 'bytes' | 'eventDt'>): number {
  const n = d.eventDt.length;
  const delta = new Float64Array(n + 1);
  let live = 0;
  for (let a = 0; a < d.bytes.length; a++) {
    if (d.start[a] < 0) live += d.bytes[a];
    else delta[d.start[a] + 1] += d.bytes[a];
    if (d.end[a] >= 0) delta[d.end[a] + 1] -= d.bytes[a];
  }
  let best = live;
  let at = 0;
  for (let k = 1; k <= n; k++) {
    live += delta[k];
    if (live > best) {
      best = live;
      at = k;
    }
  }
  return at;
}

function deviceFacets(snap: MemorySnapshot, d: ReportDeviceMemory, table: StringTable, users: StackUserFrames): AllocationFacets {
  const device = deviceIndexOfLabel(d.device);
  const trace = snap.traces.find((t) => t.device === device && hasHistory(snap, t)) ?? null;
  const inference = new CategoryInference(snap, trace);
  // Blocks live at the end, by address: the stack, stream and pool of allocations made before the trace.
  const liveBlock = new Map<number, number>();
  for (const seg of snap.segments) {
    if (seg.device !== device) continue;
    for (let i = seg.firstBlock; i < seg.firstBlock + seg.blockCount; i++) liveBlock.set(snap.blocks.address[i]!, i);
  }
  const out: AllocationFacets = {
    stream: [],
    pool: [],
    category: [],
    categoryNames: [...INFERRED_CATEGORIES],
    phaseAt: [],
    phaseOf: [],
    stepOf: [],
    phaseNames: [...PHASES],
    peakEvents: peakEvents(d),
  };
  // Phases change a few times a step: stored as runs.
  for (let i = 0; i < inference.phase.length; i++) {
    if (i > 0 && inference.phase[i] === inference.phase[i - 1] && inference.step[i] === inference.step[i - 1]) continue;
    out.phaseAt.push(i);
    out.phaseOf.push(inference.phase[i]!);
    out.stepOf.push(inference.step[i]!);
  }
  for (let a = 0; a < d.bytes.length; a++) {
    const start = d.start[a];
    const end = d.end[a];
    let shownStack = 0;
    let allocStack = 0;
    let stream = -1;
    let block: number | undefined;
    if (start >= 0 && trace) {
      shownStack = allocStack = trace.stack[start]!;
      stream = trace.stream[start]!;
    } else if (end >= 0 && trace) {
      // Made before the trace, freed in it: the free entry's frames are the allocation's unless the file recorded the freeing stacks.
      shownStack = trace.stack[end]!;
      allocStack = inference.freeStacksAreFreeTime ? 0 : shownStack;
      stream = trace.stream[end]!;
    } else {
      block = liveBlock.get(d.address[a]);
      if (block !== undefined) {
        shownStack = allocStack = snap.blocks.stack[block]!;
        stream = snap.segments[snap.blocks.segment[block]!]!.stream;
      }
    }
    const pageStack = d.stack[a];
    if (pageStack >= 0 && users.frame[pageStack] === undefined) {
      const f = shownStack > 0 ? firstUserFrame(stackFrames(snap, shownStack)) : null;
      users.frame[pageStack] = f ? table.str(userFrameLabel(f)) : 0;
      users.file[pageStack] = f ? table.str(f.filename) : 0;
      users.function[pageStack] = f ? table.str(f.name) : 0;
    }
    out.stream.push(stream);
    // A private pool is known only for blocks still in their segment at the end; otherwise PyTorch's size rule picks the pool.
    if (end < 0 && block === undefined) block = liveBlock.get(d.address[a]);
    const seg = block === undefined ? null : snap.segments[snap.blocks.segment[block]!]!;
    let pool = d.bytes[a] <= SMALL_SIZE ? 'small' : 'large';
    if (seg?.poolId && (seg.poolId[0] !== 0 || seg.poolId[1] !== 0)) pool = `(${seg.poolId[0]}, ${seg.poolId[1]})`;
    else if (seg) pool = seg.segmentType;
    out.pool.push(table.str(pool));
    out.category.push(INFERRED_CATEGORIES.indexOf(inference.category({ start, end, stack: allocStack })));
  }
  return out;
}

/** Adds the query columns to every device of a snapshot's report memory, and the first user frame of every stack. */
export function addQueryColumns(snap: MemorySnapshot, memory: ReportMemory, table: StringTable): ReportMemory {
  const users: StackUserFrames = { frame: [], file: [], function: [] };
  const devices = memory.devices.map((d) => ({ ...d, facets: deviceFacets(snap, d, table, users) }));
  // Stacks no allocation uses (none today) have no user frame.
  for (let s = 0; s < table.stacks.length; s++) {
    users.frame[s] ??= 0;
    users.file[s] ??= 0;
    users.function[s] ??= 0;
  }
  return { ...memory, devices, userFrames: users };
}
