import { DEFAULT_SITE_RULE, siteFrame, type SiteRule } from '../core/site-rule.js';
import { OWNED_CATEGORIES, recordingOption } from './types.js';
import { humanBytes } from '../core/units.js';
import type { Capture, CapturedAllocs } from './reader.js';

/** Leaked storages from one allocation site: the same kernel reached by the same stack. */
export interface LeakGroup {
  readonly kernel: string | null;
  readonly layer: string | null;
  readonly device: string;
  readonly categories: string[];
  /** Frames of the allocating stack, library runs folded into "[N frames in pkg, …]" entries (empty without stacks). */
  readonly stack: string[];
  /** The site (src/core/site-rule.ts): the first frame outside the allocator and the framework, the program's own line, if any. */
  readonly userFrame: string | null;
  /**
   * Per step: how many storages (and bytes) allocated in it were still alive when the capture
   * ended. Step `steps + 1` is the program's run after its last step end.
   */
  readonly perStep: { step: number; count: number; bytes: number }[];
  /** Bytes of this group's storages alive at each step end (index 0 = end of step 1). */
  readonly liveAtStepEnd: number[];
  /** Totals over all steps of the survivors (alive when the capture ended). */
  readonly count: number;
  readonly bytes: number;
}

export interface LeakReport {
  /** Step ends the capture holds (optimizer steps, inference calls and step() marks). */
  readonly steps: number;
  /**
   * What the steps are: 'training' (optimizer updates), 'inference' (top-level predict/execute
   * calls), 'marked' (the program's step() calls), 'mixed' for more than one kind, 'none'.
   */
  readonly stepKind: 'training' | 'inference' | 'marked' | 'mixed' | 'none';
  readonly groups: LeakGroup[];
  /** Why no verdict could be reached (too few steps), or null. */
  readonly note: string | null;
  /**
   * What part of the run the verdict can cover, when not all of it: allocations past the
   * capture's `--max-entries` were not recorded, so leaks made after them cannot be seen. Null for
   * a capture that recorded every allocation.
   */
  readonly coverage: string | null;
}

/** Step ends needed: one to allocate in, one to survive, one more to see growth. */
export const MIN_STEPS_FOR_LEAKS = 3;

/** A step end: where in the event order it falls, and when. */
interface Boundary {
  readonly seq: number;
  readonly t: number;
}

/**
 * Step ends in event order: optimizer steps (`p` records) and marks (`m`
 * records: top-level inference calls and the program's `step()` calls). Two
 * step ends with no event between them are one.
 */
export function stepBoundaries(capture: Capture): Boundary[] {
  const all: Boundary[] = [...capture.steps, ...capture.marks].map((b) => ({ seq: b.seq, t: b.t }));
  all.sort((a, b) => a.seq - b.seq || a.t - b.t);
  const out: Boundary[] = [];
  for (const b of all) if (out.length === 0 || out[out.length - 1].seq !== b.seq) out.push(b);
  return out;
}

/** Index of the first boundary after the event at `seq`: the 0-based step it happened in. */
function stepOf(bounds: readonly Boundary[], seq: number): number {
  let lo = 0;
  let hi = bounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (bounds[mid].seq <= seq) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Finds storages that leak across steps. A step is a training step (one
 * optimizer update), a top-level inference call (`predict`, `execute`,
 * `executeAsync`) or the span between two `step()` marks.
 *
 * A storage is a candidate when it was allocated during step k, is still
 * alive at the end of step k+1 (it outlived the step that made it and the
 * next one), and its category says nobody tracked owns it — not a module's
 * Parameter/Buffer, not optimizer state, not an external tensor. Candidates
 * are grouped by (device, kernel, allocating stack — its frames, folded
 * library runs aside — or layer and phase when the capture has no stacks).
 *
 * A group is a leak when both hold:
 * - growth: its live bytes at step ends never shrink, and grow in at least
 *   half of the step-to-step transitions, or at least three times with the
 *   last in the final third of the run (a tensor kept once per epoch of
 *   several batches) — memory that keeps accumulating, not a cache made once
 *   or a buffer replaced every step;
 * - still alive at the end: storages from at least two different steps were
 *   never freed before the capture ended (the program's exit). Memory a
 *   framework holds for its own bookkeeping while it runs — tfjs-layers'
 *   per-epoch loss sums inside `fit`, for one — grows across steps but is
 *   released before the program ends, and is no leak.
 */
export function findLeaks(capture: Capture, site: SiteRule = DEFAULT_SITE_RULE): LeakReport {
  const bounds = stepBoundaries(capture);
  const n = bounds.length;
  const stepKind = stepKindOf(capture);
  const coverage = coverageOf(capture, n);
  if (n < MIN_STEPS_FOR_LEAKS) {
    return {
      steps: n,
      stepKind,
      groups: [],
      note: `leak detection needs at least ${MIN_STEPS_FOR_LEAKS} completed steps (optimizer steps, top-level predict/execute calls or step() marks); this capture has ${n}`,
      coverage,
    };
  }
  const allocs = capture.allocs;
  // Per allocation: the 1-based step it belongs to, where it is a candidate.
  const stepOfAlloc = new Int32Array(allocs.length);
  // Stacks are grouped by the frames they hold, folded library runs left out: how many library
  // frames a run folds (timer and promise frames in an async loop) can differ from one step to
  // the next while the allocation comes from the same place.
  const siteKeys = new Map<number, string>();
  const siteKey = (stack: number): string => {
    let key = siteKeys.get(stack);
    if (key === undefined) {
      const frames = (capture.stacks.get(stack) ?? []).filter((f) => !f.startsWith('['));
      key = frames.length > 0 ? frames.join('\u0001') : `#${stack}`;
      siteKeys.set(stack, key);
    }
    return key;
  };
  const groups = new Map<string, number[]>();
  // Storages made in the last step or after the last step end and alive at the end: no later step
  // end can show them outliving their step, so they are no candidates, but where their site
  // leaks they are leaked too, and counted with it.
  const tails = new Map<string, number[]>();
  const keyOf = (a: number): string => {
    const stack = allocs.stack[a]!;
    return `${allocs.deviceOf(a)}\u0000${allocs.kernelOf(a) ?? ''}\u0000${stack ? siteKey(stack) : `${allocs.layerOf(a) ?? ''}\u0000${allocs.phaseOf(a)}`}`;
  };
  const add = (into: Map<string, number[]>, a: number): void => {
    const key = keyOf(a);
    let list = into.get(key);
    if (!list) into.set(key, (list = []));
    list.push(a);
  };
  for (let a = 0; a < allocs.length; a++) {
    if (OWNED_CATEGORIES.has(allocs.categoryOf(a))) continue;
    const k = stepOf(bounds, allocs.seq[a]!); // 0-based step this allocation happened in
    if (k + 1 >= n) {
      // Needs a later step end to outlive.
      if (!allocs.isFreed(a)) {
        stepOfAlloc[a] = k + 1;
        add(tails, a);
      }
      continue;
    }
    if (allocs.isFreed(a) && allocs.freeSeq[a]! < bounds[k + 1].seq) continue; // freed by the end of the next step
    stepOfAlloc[a] = k + 1;
    add(groups, a);
  }

  const out: LeakGroup[] = [];
  for (const [key, list] of groups) {
    const candidates = list.filter((a) => !allocs.isFreed(a));
    const stepsWithSurvivors = new Set(candidates.map((a) => stepOfAlloc[a]!));
    if (stepsWithSurvivors.size < 2) continue;
    const liveAtStepEnd = liveBytesAtBoundaries(allocs, list, bounds, stepOfAlloc);
    let grows = 0;
    let shrinks = 0;
    let grown = 0;
    let shrunk = 0;
    for (let j = 1; j < n; j++) {
      const change = liveAtStepEnd[j] - liveAtStepEnd[j - 1];
      if (change > 0) (grows++, (grown += change));
      else if (change < 0) (shrinks++, (shrunk -= change));
    }
    if (!shrinksLittle(shrinks, shrunk, n - 1, grown) || !(grows >= Math.max(1, Math.floor((n - 1) / 2)) || growsToTheEnd(liveAtStepEnd, grows))) continue;
    const tail = tails.get(key) ?? [];
    const survivors = [...candidates, ...tail];
    // The last step's survivors are alive at its end.
    if (tail.length > 0) {
      const shown = liveBytesAtBoundaries(allocs, [...list, ...tail], bounds, stepOfAlloc);
      for (let k = 0; k < n; k++) liveAtStepEnd[k] = shown[k]!;
    }

    const perStep = new Map<number, { step: number; count: number; bytes: number }>();
    for (const a of survivors) {
      const step = stepOfAlloc[a]!;
      const row = perStep.get(step) ?? { step, count: 0, bytes: 0 };
      row.count++;
      row.bytes += allocs.bytes[a]!;
      perStep.set(step, row);
    }
    const first = allocs.at(survivors.find((a) => allocs.stack[a]) ?? list[0]!);
    const stack = first.stack ? capture.stacks.get(first.stack) ?? [] : [];
    out.push({
      kernel: first.kernel,
      layer: first.layer,
      device: first.device,
      categories: [...new Set(list.map((a) => allocs.categoryOf(a)))],
      stack,
      userFrame: siteFrame(site, stack),
      perStep: [...perStep.values()].sort((a, b) => a.step - b.step),
      liveAtStepEnd,
      count: survivors.length,
      bytes: survivors.reduce((s, a) => s + allocs.bytes[a]!, 0),
    });
  }
  out.sort((a, b) => b.bytes - a.bytes);
  return { steps: n, stepKind, groups: out, note: null, coverage };
}

/** LeakReport.coverage: null unless the capture dropped allocations past its --max-entries. */
function coverageOf(capture: Capture, steps: number): string | null {
  const dropped = capture.end?.dropped ?? 0;
  if (dropped <= 0) return null;
  const cap = capture.header.maxEntries;
  const ends = capture.steps.length + capture.marks.length;
  const merged = ends > steps ? `; of its ${ends.toLocaleString('en-US')} step ends, those with no recorded allocation or free since the one before count as one` : '';
  return (
    `${dropped.toLocaleString('en-US')} allocations past the capture's ${recordingOption(capture.header, 'maxEntries')}${cap === null ? '' : ` ${cap.toLocaleString('en-US')}`} were not recorded: ` +
    `leaks made after the first recorded ones cannot be seen${merged} (record again with a higher ${recordingOption(capture.header, 'maxEntries')}, or none)`
  );
}

function stepKindOf(capture: Capture): LeakReport['stepKind'] {
  const kinds = new Set<LeakReport['stepKind']>();
  if (capture.steps.length > 0) kinds.add('training');
  for (const m of capture.marks) kinds.add(m.kind === 'step' ? 'marked' : 'inference');
  return kinds.size > 1 ? 'mixed' : ([...kinds][0] ?? 'none');
}

/**
 * Whether a group's live bytes kept from shrinking, but for a trace: at most one transition in
 * twenty, and at most a twentieth of what it grew by. Without stacks a group is a layer and phase,
 * which can hold a framework's few bytes freed mid-run (a scalar `fit` made) next to a leak of
 * kilobytes; a buffer replaced or released step after step shrinks far more often.
 */
function shrinksLittle(shrinks: number, shrunk: number, transitions: number, grown: number): boolean {
  return shrinks === 0 || (shrinks <= Math.floor(transitions / 20) && shrunk * 20 <= grown);
}

/**
 * Growth once every few steps that goes on to the end of the run: a tensor kept per epoch of a
 * `fit` over several batches grows its group in a fraction of the steps, but at least three
 * times, the last in the last third of the run; a cache filled in the first steps stops early.
 */
function growsToTheEnd(liveAtStepEnd: readonly number[], grows: number): boolean {
  if (grows < 3) return false;
  let last = 0;
  for (let j = 1; j < liveAtStepEnd.length; j++) if (liveAtStepEnd[j]! > liveAtStepEnd[j - 1]!) last = j;
  return last >= Math.floor((2 * (liveAtStepEnd.length - 1)) / 3);
}

/**
 * Bytes of `list` alive at each step end, in one pass: a storage made in step
 * k (0-based) is alive at step ends k … (the step it was freed in) − 1.
 */
function liveBytesAtBoundaries(allocs: CapturedAllocs, list: readonly number[], bounds: readonly Boundary[], stepOfAlloc: Int32Array): number[] {
  const n = bounds.length;
  const delta = new Float64Array(n + 1);
  for (const a of list) {
    delta[stepOfAlloc[a]! - 1] += allocs.bytes[a]!;
    delta[allocs.isFreed(a) ? stepOf(bounds, allocs.freeSeq[a]!) : n] -= allocs.bytes[a]!;
  }
  const out: number[] = [];
  let live = 0;
  for (let k = 0; k < n; k++) out.push((live += delta[k]));
  return out;
}

/**
 * One row of a leak group's step table as text: the step (`after N` for the run after the last
 * step end), storages still alive from it, their bytes, and the group's bytes alive at that step's
 * end ('—' after the last).
 */
export function leakStepCells(g: Pick<LeakGroup, 'liveAtStepEnd'>, r: LeakGroup['perStep'][number]): string[] {
  const ends = g.liveAtStepEnd.length;
  return r.step > ends
    ? [`after ${ends}`, String(r.count), humanBytes(r.bytes), '—']
    : [String(r.step), String(r.count), humanBytes(r.bytes), humanBytes(g.liveAtStepEnd[r.step - 1] ?? 0)];
}

/** `path:line:col` of a V8 frame ("fn (path:line:col)" or "path:line:col"). */
export function frameLocation(frame: string): string {
  const m = /\(([^()]*:\d+:\d+)\)\s*$/.exec(frame);
  return m ? m[1] : frame;
}
