/**
 * Categories inferred for a snapshot's allocations from their stacks and lifetimes, only where the
 * evidence is unambiguous (docs/QUERY.md, "Inferred categories", states each rule). A snapshot
 * records no tensor roles; the frames PyTorch writes name the code that allocated, and a few of
 * them say what the memory is for:
 *
 * - `torch/optim/` Python frames: inside an optimizer (torch/optim/optimizer.py wraps every
 *   `step` in its `wrapper`; adam.py, sgd.py… allocate the state) — `zero_grad` excepted.
 * - `AccumulateGrad` C++ frames (torch/csrc/autograd/functions/accumulate_grad.{h,cpp}): autograd
 *   writing a leaf's `.grad`.
 * - autograd engine frames (`torch::autograd::Engine::`, generated `*_backward` functions,
 *   torch/autograd/ and `Tensor.backward` in Python): the backward pass.
 * - torch/nn/modules/module.py `_apply` / `to` / `cuda` / `convert`, or a module's `__init__` /
 *   `reset_parameters`: a module's parameters being made or moved.
 * - torch/nn/modules/module.py `_call_impl`: a module's forward.
 *
 * Each trace event also gets the phase the program was in (forward, backward, optimizer, setup),
 * carried forward from the last event whose stack tells; the free entries tell too when the file
 * recorded `context="all"` (CUDACachingAllocator.cpp's `free` records the freeing stack then, the
 * allocation's otherwise).
 */
import { stackFrameIds, type MemorySnapshot, type TraceTable } from '../snapshot.js';
import type { Frame } from '../pytorch-vocabulary.js';

export const INFERRED_CATEGORIES = ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'unknown'] as const;
export type InferredCategory = (typeof INFERRED_CATEGORIES)[number];

export const PHASES = ['unknown', 'setup', 'forward', 'backward', 'optimizer'] as const;
export type Phase = (typeof PHASES)[number];

/** What a stack's frames say, as bits. */
export const TRAIT = {
  optimizer: 1,
  gradient: 2,
  backward: 4,
  parameterSetup: 8,
  forward: 16,
} as const;

const PHASE_CODE = { unknown: 0, setup: 1, forward: 2, backward: 3, optimizer: 4 } as const;

function path(f: Frame): string {
  return f.filename.replace(/\\/g, '/');
}

function isPython(f: Frame): boolean {
  return f.filename.endsWith('.py');
}

/** The traits of one frame. */
export function frameTraits(f: Frame): number {
  const p = path(f);
  let t = 0;
  if (isPython(f)) {
    if (/(^|\/)torch\/optim\//.test(p) && f.name !== 'zero_grad') t |= TRAIT.optimizer;
    if (/(^|\/)torch\/autograd\//.test(p) || (/(^|\/)torch\/_tensor\.py$/.test(p) && f.name === 'backward')) t |= TRAIT.backward;
    if (/(^|\/)torch\/nn\/modules\/module\.py$/.test(p)) {
      if (f.name === '_apply' || f.name === 'to' || f.name === 'cuda' || f.name === 'convert') t |= TRAIT.parameterSetup;
      if (f.name === '_call_impl') t |= TRAIT.forward;
    }
    if (/(^|\/)torch\/nn\/modules\//.test(p) && (f.name === '__init__' || f.name === 'reset_parameters')) t |= TRAIT.parameterSetup;
    return t;
  }
  if (f.name.includes('AccumulateGrad') || p.endsWith('accumulate_grad.cpp')) t |= TRAIT.gradient | TRAIT.backward;
  if (f.name.includes('torch::autograd::Engine::') || f.name.includes('torch::autograd::generated::')) t |= TRAIT.backward;
  return t;
}

/** The phase a stack's traits put the program in (unknown when they say nothing or disagree). */
export function phaseOfTraits(t: number): Phase {
  if (t & TRAIT.optimizer) return t & (TRAIT.backward | TRAIT.forward) ? 'unknown' : 'optimizer';
  if (t & TRAIT.backward) return 'backward';
  if (t & TRAIT.parameterSetup) return t & TRAIT.forward ? 'unknown' : 'setup';
  if (t & TRAIT.forward) return 'forward';
  return 'unknown';
}

/** Allocation facts the rules read: its events (-1: before the trace; `end` -1: never freed) and its allocating stack (0: unknown). */
export interface AllocationLife {
  readonly start: number;
  readonly end: number;
  readonly stack: number;
}

/**
 * The categories of one device's allocations. Build once per trace; `category` is then a few
 * array reads per allocation.
 */
export class CategoryInference {
  private readonly traitCache = new Map<number, number>();
  /** Per event: phase code after it, and the run (a stretch of one phase) it belongs to. */
  readonly phase: Uint8Array;
  readonly run: Int32Array;
  /** Per event: how many optimizer runs began at or before it (the training step, from 0 before the first). */
  readonly step: Int32Array;
  /** Whether the trace's free entries carry the freeing stack (recorded with context="all"), not the allocation's. */
  readonly freeStacksAreFreeTime: boolean = false;
  /** Whether the trace records any allocation. */
  readonly traceAllocates: boolean = false;

  constructor(
    private readonly snap: MemorySnapshot,
    trace: TraceTable | null,
  ) {
    const n = trace?.count ?? 0;
    this.phase = new Uint8Array(n);
    this.run = new Int32Array(n);
    this.step = new Int32Array(n);
    if (!trace) return;
    const ALLOC = snap.actionNames.indexOf('alloc');
    const FREE_REQ = snap.actionNames.indexOf('free_requested');
    const FREE_DONE = snap.actionNames.indexOf('free_completed');
    // Free entries carry the freeing stack only when the file recorded context="all": then some
    // allocation's free has another stack than its alloc.
    const allocStack = new Map<number, number>();
    let freeStacksAreFreeTime = false;
    for (let i = 0; i < n && !freeStacksAreFreeTime; i++) {
      const a = trace.action[i];
      if (a === ALLOC) allocStack.set(trace.addr[i], trace.stack[i]);
      else if (a === FREE_REQ || a === FREE_DONE) {
        const s = allocStack.get(trace.addr[i]);
        if (s !== undefined && s !== trace.stack[i]) freeStacksAreFreeTime = true;
      }
    }
    this.freeStacksAreFreeTime = freeStacksAreFreeTime;
    this.traceAllocates = allocStack.size > 0;
    let phase: number = PHASE_CODE.unknown;
    let run = 0;
    let step = 0;
    for (let i = 0; i < n; i++) {
      const a = trace.action[i];
      const tells = a === ALLOC || (freeStacksAreFreeTime && (a === FREE_REQ || a === FREE_DONE));
      if (tells) {
        const p = PHASE_CODE[phaseOfTraits(this.traits(trace.stack[i]))];
        if (p !== PHASE_CODE.unknown && p !== phase) {
          phase = p;
          run++;
          if (p === PHASE_CODE.optimizer) step++;
        }
      }
      this.phase[i] = phase;
      this.run[i] = run;
      this.step[i] = step;
    }
  }

  /** The OR of every frame's traits in snapshot stack `stack`. */
  traits(stack: number): number {
    if (stack <= 0) return 0;
    let t = this.traitCache.get(stack);
    if (t === undefined) {
      t = 0;
      for (const id of stackFrameIds(this.snap, stack)) t |= frameTraits(this.snap.frames[id]!);
      this.traitCache.set(stack, t);
    }
    return t;
  }

  phaseAt(event: number): Phase {
    return event >= 0 && event < this.phase.length ? PHASES[this.phase[event]!]! : 'unknown';
  }

  stepAt(event: number): number {
    return event >= 0 && event < this.step.length ? this.step[event]! : 0;
  }

  /**
   * The rules, in docs/QUERY.md's words: each names one category; an allocation that two stack
   * rules claim is unknown; the lifetime rule for parameters applies only to stacks no rule reads.
   */
  category(a: AllocationLife): InferredCategory {
    const t = this.traits(a.stack);
    const claims: InferredCategory[] = [];
    const freedInOtherRun = a.end >= 0 && a.start >= 0 && this.run[a.end] !== this.run[a.start];
    const sameRun = a.end >= 0 && a.start >= 0 && this.run[a.end] === this.run[a.start];
    if (t & TRAIT.optimizer) claims.push(sameRun ? 'temporary' : 'optimizer_state');
    if (t & TRAIT.gradient) claims.push('gradient');
    if (t & TRAIT.parameterSetup) claims.push('parameter');
    const forwardOnly = (t & TRAIT.forward) !== 0 && (t & (TRAIT.backward | TRAIT.optimizer | TRAIT.parameterSetup)) === 0;
    if (forwardOnly && a.start >= 0 && a.end >= 0) {
      if (freedInOtherRun && this.phase[a.end] === PHASE_CODE.backward && this.phase[a.start] === PHASE_CODE.forward) claims.push('activation');
      else if (sameRun) claims.push('temporary');
    }
    const backwardOnly = (t & TRAIT.backward) !== 0 && (t & (TRAIT.gradient | TRAIT.optimizer | TRAIT.parameterSetup)) === 0;
    if (backwardOnly && sameRun) claims.push('temporary');
    // A trace that allocates nothing (a state-only snapshot) gives "live through the trace" no meaning.
    if (claims.length === 0 && this.traceAllocates && (t & (TRAIT.backward | TRAIT.forward)) === 0 && a.start < 0 && a.end < 0) claims.push('parameter');
    return claims.length === 1 ? claims[0]! : 'unknown';
  }
}
