import { OWNED_CATEGORIES } from './types.js';
import type { Capture, CapturedAlloc } from './reader.js';

/** Leaked storages from one allocation site: the same kernel reached by the same stack. */
export interface LeakGroup {
  readonly kernel: string | null;
  readonly layer: string | null;
  readonly device: string;
  readonly categories: string[];
  /** Frames of the allocating stack (empty when the capture has no stacks). */
  readonly stack: string[];
  /** The first frame outside node_modules and Node's internals: the program's own line, if any. */
  readonly userFrame: string | null;
  /** Per completed step: how many storages (and bytes) allocated in it were still alive at the last step end. */
  readonly perStep: { step: number; count: number; bytes: number }[];
  /** Bytes of this group's surviving storages alive at each step end (index 0 = end of step 1). */
  readonly liveAtStepEnd: number[];
  /** Totals over all steps of the survivors. */
  readonly count: number;
  readonly bytes: number;
}

export interface LeakReport {
  /** Step ends the capture holds. */
  readonly steps: number;
  readonly groups: LeakGroup[];
  /** Why no verdict could be reached (too few steps), or null. */
  readonly note: string | null;
}

/** Step ends needed: one to allocate in, one to survive, one more to see growth. */
export const MIN_STEPS_FOR_LEAKS = 3;

/**
 * Finds storages that leak across training steps.
 *
 * A storage is a candidate when it was allocated during a completed step k,
 * is still alive at the end of step k+1 (it outlived the step that made it
 * and the next one), and its category says nobody tracked owns it — not a
 * module's Parameter/Buffer, not optimizer state, not an external tensor.
 * Candidates are grouped by (kernel, allocating stack — or layer and phase
 * when the capture has no stacks). A group is a leak when survivors from at
 * least two different steps are still alive at the last step end and the
 * group's live bytes at step ends never shrink and grow in at least half of
 * the step-to-step transitions: memory that keeps accumulating, not a cache
 * made once or a buffer that is replaced every step.
 */
export function findLeaks(capture: Capture): LeakReport {
  const ends = capture.steps.map((s) => s.t);
  const n = ends.length;
  if (n < MIN_STEPS_FOR_LEAKS) {
    return {
      steps: n,
      groups: [],
      note: `leak detection needs at least ${MIN_STEPS_FOR_LEAKS} completed training steps (optimizer steps); this capture has ${n}`,
    };
  }
  const groups = new Map<string, CapturedAlloc[]>();
  for (const a of capture.allocs) {
    if (OWNED_CATEGORIES.has(a.category)) continue;
    const step = a.step + 1; // the step this allocation happened in
    if (step >= n) continue; // needs a later step end to outlive
    if (a.freeT !== null && a.freeT <= ends[step]) continue; // freed by the end of the next step
    const key = `${a.device}\u0000${a.kernel ?? ''}\u0000${a.stack ? `#${a.stack}` : `${a.layer ?? ''}\u0000${a.phase}`}`;
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(a);
  }

  const lastEnd = ends[n - 1];
  const out: LeakGroup[] = [];
  for (const list of groups.values()) {
    const liveAtStepEnd = ends.map((e) => {
      let bytes = 0;
      for (const a of list) if (a.t <= e && (a.freeT === null || a.freeT > e)) bytes += a.bytes;
      return bytes;
    });
    const survivors = list.filter((a) => a.freeT === null || a.freeT > lastEnd);
    const stepsWithSurvivors = new Set(survivors.map((a) => a.step + 1));
    if (stepsWithSurvivors.size < 2) continue;
    let grows = 0;
    let shrinks = 0;
    for (let j = 1; j < n; j++) {
      if (liveAtStepEnd[j] > liveAtStepEnd[j - 1]) grows++;
      else if (liveAtStepEnd[j] < liveAtStepEnd[j - 1]) shrinks++;
    }
    if (shrinks > 0 || grows < Math.max(1, Math.floor((n - 1) / 2))) continue;

    const perStep = new Map<number, { step: number; count: number; bytes: number }>();
    for (const a of survivors) {
      const step = a.step + 1;
      const row = perStep.get(step) ?? { step, count: 0, bytes: 0 };
      row.count++;
      row.bytes += a.bytes;
      perStep.set(step, row);
    }
    const first = list[0];
    const stack = first.stack ? capture.stacks.get(first.stack) ?? [] : [];
    out.push({
      kernel: first.kernel,
      layer: first.layer,
      device: first.device,
      categories: [...new Set(list.map((a) => a.category))],
      stack,
      userFrame: userFrame(stack),
      perStep: [...perStep.values()].sort((a, b) => a.step - b.step),
      liveAtStepEnd,
      count: survivors.length,
      bytes: survivors.reduce((s, a) => s + a.bytes, 0),
    });
  }
  out.sort((a, b) => b.bytes - a.bytes);
  return { steps: n, groups: out, note: null };
}

/**
 * Library frames: installed packages, Node's internals, and TFJS's own sources
 * (with source maps enabled, e.g. under tsx, TFJS frames name
 * `…/tfjs-core/src/engine.ts` instead of the node_modules bundle).
 */
const LIBRARY_FRAME = /node_modules|node:|[\\/]tfjs-[\w-]+[\\/]src[\\/]/;

/** The first frame that is the program's own: not a library frame. */
export function userFrame(stack: readonly string[]): string | null {
  for (const f of stack) {
    if (LIBRARY_FRAME.test(f) || f.startsWith('new Promise') || f.endsWith('(<anonymous>)') || f === '<anonymous>') continue;
    return f;
  }
  return null;
}

/** `path:line:col` of a V8 frame ("fn (path:line:col)" or "path:line:col"). */
export function frameLocation(frame: string): string {
  const m = /\(([^()]*:\d+:\d+)\)\s*$/.exec(frame);
  return m ? m[1] : frame;
}
