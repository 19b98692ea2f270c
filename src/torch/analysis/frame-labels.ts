/**
 * Which frame an allocation is charged to, and frames as labels: `file:line:function` like
 * _memory_viz.py, with the unwinder's, interpreter's and allocator's own frames left out. Stacks
 * repeat on thousands of blocks, so each snapshot keeps its stacks' labels (`frameLabels`).
 */
import { DEFAULT_SITE_RULE, isInternalFrame, type SiteRule } from '../../core/site-rule.js';
import { escapeControl } from '../../render/escape.js';
import { stackFrameIds, type MemorySnapshot } from '../snapshot.js';
import type { Frame } from '../pytorch-vocabulary.js';

/** A C++ symbol without its parameter list (`ns::f(int, long) const` → `ns::f`). */
function withoutParameters(name: string): string {
  let end = name.length;
  if (name.endsWith(' const')) end -= 6;
  if (name[end - 1] !== ')') return name;
  let depth = 0;
  for (let i = end - 1; i >= 0; i--) {
    const c = name[i];
    if (c === ')') depth++;
    else if (c === '(') {
      depth--;
      if (depth === 0) return i > 0 ? name.slice(0, i) : name;
    }
  }
  return name;
}

/** Longest frame label kept (C++ template names run to kilobytes). */
const MAX_FRAME_LABEL = 160;

/**
 * `file:line:function` with the file's base name (Windows or POSIX paths), like _memory_viz;
 * C++ frames without a file or line are shown as the bare symbol without its parameters, and an
 * unknown line (-1) as `?`.
 */
export function formatFrame(f: Frame, fullFilename = false): string {
  const file = fullFilename ? f.filename : (f.filename.split(/[\\/]/).pop() ?? f.filename);
  const line = f.line < 0 ? '?' : String(f.line);
  const label = escapeControl((file === '' || file === '??') && f.line === 0 ? withoutParameters(f.name) : `${file}:${line}:${isPythonFrame(f) ? f.name : withoutParameters(f.name)}`);
  return label.length > MAX_FRAME_LABEL ? label.slice(0, MAX_FRAME_LABEL - 1) + '…' : label;
}

/** Frames of the unwinder, the interpreter loop and dispatcher plumbing say nothing about who allocated. */
const NOISE_FUNCTIONS = ['unwind::unwind', 'CapturedTraceback::gather', 'gather_with_cpp', '_start', '__libc_start_main', '__libc_init_first', 'PyEval_', 'PyObject_', 'PyFunction_', 'Py_RunMain', 'Py_BytesMain', 'pymain_', '_PyRun_', 'pyrun_file', 'run_mod', 'run_eval_code_obj', 'cfunction_vectorcall'];
const NOISE_FILES = ['core/boxing', '/Register', '/Redispatch', 'pythonrun.c', 'Modules/main.c', 'Objects/call.c', 'Objects/methodobject.c', 'pycore_ceval.h', 'ceval.c', 'cpython/abstract.h'];

export function isInformativeFrame(f: Frame): boolean {
  for (const s of NOISE_FUNCTIONS) if (f.name.includes(s)) return false;
  for (const s of NOISE_FILES) if (f.filename.includes(s)) return false;
  return true;
}

function isPythonFrame(f: Frame): boolean {
  return f.filename.endsWith('.py');
}

/** A frame as the site rule reads it: `path:line:function`, the full path; native (C/C++) unless its file is Python. */
function isInternal(rule: SiteRule, f: Frame): boolean {
  return isInternalFrame(rule, `${f.filename}:${f.line}:${f.name}`, !isPythonFrame(f));
}

/** C++ frames of the allocator and tensor factories: every allocation passes through them. */
function isAllocatorPlumbing(f: Frame): boolean {
  return /^(c10::cuda::CUDACachingAllocator|c10::|at::detail::|at::TensorBase at::detail::|at::empty|at::native::empty|at::\(anonymous namespace\)::create_out)/.test(f.name);
}

/** A destructor or a standard container's own frame, on the way from a dropped reference to the free. */
function isTeardown(f: Frame): boolean {
  return /::~|^std::/.test(f.name);
}

/** The ATen operator a C++ stack is running (`at::_ops::NAME::call`), if any. */
const ATEN_OP = /at::_ops::(\w+)::(call|redispatch)\(/;

export const NO_FRAMES = '<no frames recorded>';

interface StackInfo {
  /** Informative frames, innermost first. */
  readonly frames: Frame[];
  /** Index in `frames` of the allocating frame (−1 when there are none). */
  readonly allocating: number;
  readonly allocatingLabel: string;
  /** The allocator's own innermost frames left out of `frames` (a C++ stack's plumbing). */
  readonly plumbing: number;
}

/** Per-snapshot caches: stacks repeat on thousands of blocks. */
export class FrameLabels {
  private readonly info = new Map<number, StackInfo>();
  private readonly rootFirstLabels = new Map<number, string[]>();
  constructor(
    private readonly snapshot: MemorySnapshot,
    private readonly rule: SiteRule = DEFAULT_SITE_RULE,
  ) {}

  /**
   * The frame an allocation is charged to: its site by the site rule (src/core/site-rule.ts: the
   * innermost Python frame outside torch and whatever else the rule skips — the user's line).
   * When every frame is internal: the innermost Python frame, else (a C++-only stack, e.g. the
   * autograd thread) the ATen operator it runs, else the innermost C++ frame past the allocator's own.
   */
  private stackInfo(stack: number): StackInfo {
    let info = this.info.get(stack);
    if (info) return info;
    const frames = Array.from(stackFrameIds(this.snapshot, stack), (id) => this.snapshot.frames[id]!).filter(isInformativeFrame);
    // The allocator's and tensor factories' own frames sit innermost on every C++ stack.
    let plumbing = 0;
    while (plumbing < frames.length && !isPythonFrame(frames[plumbing]!) && isAllocatorPlumbing(frames[plumbing]!)) plumbing++;
    if (plumbing === frames.length) plumbing = 0;
    frames.splice(0, plumbing);
    let allocating = frames.findIndex((f) => !isInternal(this.rule, f));
    if (allocating < 0) allocating = frames.findIndex(isPythonFrame);
    let label: string | null = null;
    if (allocating < 0) {
      const op = frames.findIndex((f) => ATEN_OP.test(f.name));
      if (op >= 0) {
        allocating = op;
        label = `aten::${ATEN_OP.exec(frames[op]!.name)![1]} (C++ stack)`;
      } else {
        // A free's stack runs through the destructors that dropped the last reference
        // (`std::vector<at::Tensor>::~vector`): the site is the code that ran them.
        allocating = frames.findIndex((f) => !isAllocatorPlumbing(f) && !isTeardown(f));
        if (allocating < 0) allocating = frames.findIndex((f) => !isAllocatorPlumbing(f));
        if (allocating < 0 && frames.length) allocating = 0;
      }
    }
    info = { frames, allocating, allocatingLabel: label ?? (allocating >= 0 ? formatFrame(frames[allocating]!) : NO_FRAMES), plumbing };
    this.info.set(stack, info);
    return info;
  }

  allocatingFrame(stack: number): string {
    return this.stackInfo(stack).allocatingLabel;
  }

  /**
   * Where the allocating frame is among the stack's informative frames, innermost first (the
   * frames before it are the allocator's and the framework's); 0 when the stack has none.
   */
  allocatingIndex(stack: number): number {
    const info = this.stackInfo(stack);
    return info.allocating < 0 ? 0 : info.allocating + info.plumbing;
  }

  /** Informative frames, outermost first (flame-graph order). */
  rootFirst(stack: number): string[] {
    let labels = this.rootFirstLabels.get(stack);
    if (!labels) {
      labels = this.stackInfo(stack).frames.map((f) => formatFrame(f)).reverse();
      this.rootFirstLabels.set(stack, labels);
    }
    return labels;
  }

  /** The allocating frame and up to `n − 1` of its callers, innermost first. */
  top(stack: number, n: number): string[] {
    const info = this.stackInfo(stack);
    if (info.allocating < 0) return [];
    return info.frames.slice(info.allocating, info.allocating + n).map((f) => formatFrame(f));
  }
}

const labelCache = new WeakMap<MemorySnapshot, Map<SiteRule, FrameLabels>>();

/** The snapshot's frame labeller for a site rule, made on first use and kept while the snapshot lives. */
export function frameLabels(snapshot: MemorySnapshot, rule: SiteRule = DEFAULT_SITE_RULE): FrameLabels {
  let byRule = labelCache.get(snapshot);
  if (!byRule) labelCache.set(snapshot, (byRule = new Map()));
  let l = byRule.get(rule);
  if (!l) byRule.set(rule, (l = new FrameLabels(snapshot, rule)));
  return l;
}

export function allocatingFrame(snapshot: MemorySnapshot, stack: number, rule: SiteRule = DEFAULT_SITE_RULE): string {
  return frameLabels(snapshot, rule).allocatingFrame(stack);
}

/** A stack's informative frames as labels, outermost first (flame-graph order). */
export function rootFirstFrameLabels(snapshot: MemorySnapshot, stack: number): string[] {
  return frameLabels(snapshot).rootFirst(stack);
}
