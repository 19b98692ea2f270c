import type { GradientPair, KernelEvent, ScopeKind, TensorRef } from '../core/events.js';
import { type TfEngine, type TfKernelParams, type TfTapeNode, type TfTensor, isTensorLike } from './engine-types.js';
import type { TfjsModule, TfjsOptimizer } from './refs.js';
import type { SinkDispatch } from './sink-dispatch.js';
import type { StorageIdentity } from './storage-identity.js';

/**
 * Attribution for one installation: what the program is doing when an event happens. It keeps the
 * forward module frames (including the implicit ones of a model driven by fit/predict), the
 * gradient runs and the engine scopes that mark their forward and backward, the module that
 * recorded each tape node (so backprop can be placed in modules), and optimizer steps; from them
 * it keeps the context's phase and module up to date and emits the module, gradient, optimizer,
 * scope and kernel events. The wrappers in engine-patches.ts call it.
 */

/** One forward invocation of a module. Tape nodes recorded inside it point at it. */
export interface Frame {
  readonly module: TfjsModule;
  readonly parent: Frame | null;
  readonly depth: number;
  /**
   * Opened by memscope, not by the module's own `call`: tfjs-layers runs a
   * root model's layers from `fit`/`predict`/`evaluate` without calling the
   * root's `call`, so the root's forward spans its first layer's start to its
   * last output layer's end.
   */
  readonly implicit: boolean;
  /** Implicit frames: output layers that have not finished yet. */
  readonly pending: Set<object> | null;
  /** Implicit frames: the outputs of the output layers that finished. */
  readonly outputs: TensorRef[];
  /** Engine scope depth when the frame opened; an implicit frame never outlives it. */
  readonly scopeDepth: number;
}

/** One `engine.gradients` call in progress. */
export interface GradientRun {
  /** 0 before its 'forward' tidy, 1 inside it, 2 between, 3 inside 'backward', 4 after. */
  state: number;
  /** The backward frame that was current when this run's backprop began. */
  bwBase: Frame | null;
}

/** What an ending engine scope was to memscope (see beforeScopeEnd). */
export interface EndingScope {
  readonly mark: number;
  readonly name: string;
}

const SCOPE_PLAIN = 0;
const SCOPE_GRAD_FORWARD = 1;
const SCOPE_GRAD_BACKWARD = 2;
/** tfjs-core's OP_SCOPE_SUFFIX (ops/operation.ts). */
const OP_SCOPE_SUFFIX = '__op';

/**
 * Where onTapeNode keeps a node's recording frame and the engine's gradient
 * closure: process-wide keys, like refs.ts's, so objects keep one shape
 * however many installations come and go.
 */
const NODE_FRAME_KEY = Symbol('memscope.frame');
const NODE_GRADIENT_KEY = Symbol('memscope.gradient');

/** A tape node recorded under a module (see onTapeNode). */
type TaggedTapeNode = TfTapeNode & { [key: symbol]: Frame | null | ((dys: unknown[]) => unknown) | undefined };

/**
 * The layers whose completion ends a model's forward: its output layers, or
 * for a Sequential that was never built on its own (nested in another
 * Sequential, whose graph holds its layers directly) its last layer.
 */
function pendingOutputLayers(mod: TfjsModule): Set<object> | null {
  const out = mod.layer.outputLayers;
  if (Array.isArray(out) && out.length > 0) return new Set<object>(out);
  const layers = mod.layer.layers;
  if (Array.isArray(layers) && layers.length > 0) return new Set<object>([layers[layers.length - 1]!]);
  return null;
}

export class Attribution {
  /** Modules instrumented so far (the tape-node hook does nothing until there is one). */
  moduleCount = 0;
  private fwdTop: Frame | null = null;
  private bwTop: Frame | null = null;
  private forwardDepth = 0;
  private backwardDepth = 0;
  private optimizerDepth = 0;
  private readonly gradRuns: GradientRun[] = [];
  /** The engine scopes memscope gave a meaning to (gradients' forward/backward tidies), innermost last. */
  private readonly markedScopes: object[] = [];
  private readonly scopeMarks: number[] = [];
  /** The innermost marked scope (read by the endScope fast path). */
  markedTop: object | null = null;
  /** Implicit module frames open now (they close at scope ends). */
  implicitOpen = 0;
  /**
   * The innermost gradient run waits for the engine's 'forward' or 'backward' tidy (its state is 0
   * or 2): only then does a new scope's name need comparing. Op scopes' names are built by
   * concatenation, so comparing every one cost a string-compare builtin call per op.
   */
  awaitsGradientScope = false;

  constructor(
    private readonly engine: TfEngine,
    private readonly dispatch: SinkDispatch,
    private readonly identity: StorageIdentity,
  ) {}

  private updateCtx(): void {
    const ctx = this.dispatch.ctx;
    if (this.optimizerDepth > 0) ctx.phase = 'optimizer';
    else if (this.backwardDepth > 0) ctx.phase = 'backward';
    else if (this.fwdTop !== null || this.forwardDepth > 0) ctx.phase = 'forward';
    else ctx.phase = 'none';
    ctx.module = this.backwardDepth > 0 && this.optimizerDepth === 0 ? (this.bwTop?.module ?? null) : (this.fwdTop?.module ?? null);
  }

  // --------------------------------------------------------------- kernels

  kernelStart(name: string, params: TfKernelParams): KernelEvent | null {
    const d = this.dispatch;
    if (!d.wantKernels) return null;
    const inputs: TensorRef[] = [];
    const map = params.inputs;
    if (map != null) {
      for (const k in map) {
        const t = map[k];
        if (isTensorLike(t)) inputs.push(this.identity.refFor(t));
      }
    }
    const ev: KernelEvent = { name, inputs, outputs: [], composite: params.kernelName == null };
    d.emit(d.kernelStartSinks, 'onKernelStart', ev);
    return ev;
  }

  kernelEnd(start: KernelEvent, out: unknown): void {
    const outputs = out == null ? [] : this.identity.refsOf(out);
    const d = this.dispatch;
    d.emit(d.kernelEndSinks, 'onKernelEnd', { name: start.name, inputs: start.inputs, outputs, composite: start.composite });
  }

  // ---------------------------------------------------------------- scopes

  onScopeStart(engine: TfEngine): void {
    const scope = engine.state.activeScope;
    if (scope == null) return;
    const run = this.gradRuns.length > 0 ? this.gradRuns[this.gradRuns.length - 1]! : undefined;
    if (run !== undefined) {
      // The engine's own tidies inside `gradients`: 'forward' around f, then
      // 'backward' around backprop. Only these two are remembered (plain
      // scopes, one per op call, cost nothing here).
      let mark = SCOPE_PLAIN;
      if (run.state === 0 && scope.name === 'forward') {
        run.state = 1;
        mark = SCOPE_GRAD_FORWARD;
        this.forwardDepth++;
      } else if (run.state === 2 && scope.name === 'backward') {
        run.state = 3;
        run.bwBase = this.bwTop;
        mark = SCOPE_GRAD_BACKWARD;
        this.backwardDepth++;
      }
      if (mark !== SCOPE_PLAIN) {
        this.syncGradientScopeWatch();
        this.markedScopes.push(scope);
        this.markedTop = scope;
        this.scopeMarks.push(mark);
        this.updateCtx();
      }
    }
    if (this.dispatch.scopeStartSinks.length > 0) this.emitScope('onScopeStart', scope.name);
  }

  private syncGradientScopeWatch(): void {
    const n = this.gradRuns.length;
    const state = n > 0 ? this.gradRuns[n - 1]!.state : -1;
    this.awaitsGradientScope = state === 0 || state === 2;
  }

  /** tfjs-core's `op()` wraps every op in a scope named `<op>__op`: reported as kind 'op', name without the suffix. */
  private emitScope(method: 'onScopeStart' | 'onScopeEnd', name: string): void {
    const d = this.dispatch;
    const list = method === 'onScopeStart' ? d.scopeStartSinks : d.scopeEndSinks;
    if (name.endsWith(OP_SCOPE_SUFFIX)) d.emit(list, method, name.slice(0, -OP_SCOPE_SUFFIX.length), 'op' satisfies ScopeKind, true);
    else d.emit(list, method, name, 'tidy' satisfies ScopeKind, true);
  }

  /** Before `engine.endScope`: what the ending scope was to memscope (null: nothing to do after). */
  beforeScopeEnd(engine: TfEngine): EndingScope | null {
    const scope = engine.state.activeScope;
    if (scope == null) return null;
    const n = this.markedScopes.length;
    const mark = n > 0 && this.markedScopes[n - 1] === scope ? this.scopeMarks[n - 1]! : SCOPE_PLAIN;
    if (mark === SCOPE_GRAD_BACKWARD) {
      // Backprop is over: leave every module it entered before the tidy frees
      // backprop's intermediates (they are still live at the Exit events).
      const run = this.gradRuns[this.gradRuns.length - 1];
      this.backwardTo(run?.bwBase ?? null);
    }
    if (mark === SCOPE_PLAIN && this.dispatch.scopeEndSinks.length === 0 && (this.fwdTop === null || !this.fwdTop.implicit)) return null;
    return { mark, name: scope.name };
  }

  afterScopeEnd(engine: TfEngine, ended: EndingScope): void {
    if (ended.mark !== SCOPE_PLAIN) {
      this.markedScopes.pop();
      this.markedTop = this.markedScopes.length > 0 ? this.markedScopes[this.markedScopes.length - 1]! : null;
      this.scopeMarks.pop();
      const run = this.gradRuns[this.gradRuns.length - 1];
      if (ended.mark === SCOPE_GRAD_FORWARD) {
        this.forwardDepth--;
        if (run !== undefined) run.state = 2;
      } else {
        this.backwardDepth--;
        if (run !== undefined) run.state = 4;
      }
      this.syncGradientScopeWatch();
      this.updateCtx();
    }
    // An implicit module frame never outlives the engine scope it opened in
    // (fit/predict run each batch's forward inside a tidy).
    if (this.fwdTop !== null && this.fwdTop.implicit) {
      const depth = engine.state.scopeStack.length;
      while (this.fwdTop !== null && this.fwdTop.implicit && this.fwdTop.scopeDepth > depth) {
        this.closeFrame(this.fwdTop, this.fwdTop.outputs);
      }
    }
    if (this.dispatch.scopeEndSinks.length > 0) this.emitScope('onScopeEnd', ended.name);
  }

  annotationStart(name: string): void {
    const d = this.dispatch;
    d.emit(d.scopeStartSinks, 'onScopeStart', name, 'annotation' satisfies ScopeKind, true);
  }

  annotationEnd(name: string): void {
    const d = this.dispatch;
    d.emit(d.scopeEndSinks, 'onScopeEnd', name, 'annotation' satisfies ScopeKind, true);
  }

  // ------------------------------------------------------------- gradients

  gradientStart(xs: TfTensor[]): GradientRun {
    const run: GradientRun = { state: 0, bwBase: null };
    this.gradRuns.push(run);
    this.syncGradientScopeWatch();
    const d = this.dispatch;
    if (d.gradStartSinks.length > 0) d.emit(d.gradStartSinks, 'onGradientStart', this.identity.refsOf(xs));
    return run;
  }

  gradientEnd(run: GradientRun, xs: TfTensor[], result: { grads: Array<TfTensor | null | undefined> } | null): void {
    const i = this.gradRuns.lastIndexOf(run);
    if (i >= 0) this.gradRuns.length = i;
    this.syncGradientScopeWatch();
    if (this.bwTop !== run.bwBase && run.state >= 3) this.backwardTo(run.bwBase);
    this.updateCtx();
    const d = this.dispatch;
    if (d.gradEndSinks.length > 0) {
      const pairs: GradientPair[] = [];
      if (result !== null) {
        const identity = this.identity;
        for (let k = 0; k < xs.length; k++) {
          const g = result.grads[k];
          pairs.push({ x: identity.refFor(xs[k]!), grad: isTensorLike(g) ? identity.refFor(g) : null });
        }
      }
      d.emit(d.gradEndSinks, 'onGradientEnd', pairs);
    }
  }

  /**
   * After `addTapeNode`: ties the node's gradient closure to the module that
   * recorded it. The node keeps the recording frame and the engine's closure
   * under process-wide symbols, and its `gradient` becomes one shared
   * function that finds them through `this` (the engine always calls
   * `node.gradient(dys)` as a method): no closure is allocated per recorded op.
   */
  onTapeNode(engine: TfEngine): void {
    if (this.moduleCount === 0) return;
    const tape = engine.state.activeTape;
    if (tape == null || tape.length === 0) return;
    const node = tape[tape.length - 1]! as TaggedTapeNode;
    const gradient = node.gradient;
    if (typeof gradient !== 'function') return;
    node[NODE_FRAME_KEY] = this.fwdTop;
    node[NODE_GRADIENT_KEY] = gradient;
    node.gradient = this.moduleGradient;
  }

  private readonly moduleGradient = ((attribution: Attribution) =>
    function (this: TaggedTapeNode, dys: unknown[]): unknown {
      if (attribution.dispatch.active && attribution.backwardDepth > 0) {
        try {
          attribution.backwardTo((this[NODE_FRAME_KEY] as Frame | null | undefined) ?? null);
        } catch (err) {
          attribution.dispatch.internalError(err);
        }
      }
      const gradient = this[NODE_GRADIENT_KEY] as (dys: unknown[]) => unknown;
      return gradient(dys);
    })(this);

  /**
   * Moves backprop's position to `target` (the frame that recorded the node
   * about to run): exits the frames being left, innermost first, then enters
   * the frames being reached, outermost first.
   */
  private backwardTo(target: Frame | null): void {
    const cur = this.bwTop;
    if (cur === target) return;
    const d = this.dispatch;
    let a = cur;
    let b = target;
    while (a !== b) {
      if (a === null) b = b!.parent;
      else if (b === null) a = a.parent;
      else if (a.depth > b.depth) a = a.parent;
      else if (b.depth > a.depth) b = b.parent;
      else {
        a = a.parent;
        b = b.parent;
      }
    }
    const common = a;
    for (let f = cur; f !== null && f !== common; f = f.parent) {
      d.ctx.module = f.module;
      d.emit(d.bwExitSinks, 'onBackwardModuleExit', f.module);
      this.bwTop = f.parent;
    }
    const path: Frame[] = [];
    for (let f = target; f !== null && f !== common; f = f.parent) path.push(f);
    for (let i = path.length - 1; i >= 0; i--) {
      const f = path[i]!;
      this.bwTop = f;
      d.ctx.module = f.module;
      d.emit(d.bwEnterSinks, 'onBackwardModuleEnter', f.module);
    }
    this.bwTop = target;
    this.updateCtx();
  }

  // --------------------------------------------------------------- modules

  private openFrame(mod: TfjsModule, implicit: boolean, inputs: unknown): Frame {
    const parent = this.fwdTop;
    const frame: Frame = {
      module: mod,
      parent,
      depth: parent === null ? 0 : parent.depth + 1,
      implicit,
      pending: implicit ? pendingOutputLayers(mod) : null,
      outputs: [],
      scopeDepth: this.engine.state.scopeStack.length,
    };
    this.fwdTop = frame;
    if (implicit) this.implicitOpen++;
    this.updateCtx();
    const d = this.dispatch;
    if (d.moduleEnterSinks.length > 0) d.emit(d.moduleEnterSinks, 'onModuleEnter', mod, this.identity.refsOf(inputs), true);
    return frame;
  }

  private closeFrame(frame: Frame, outputs: readonly TensorRef[]): void {
    const d = this.dispatch;
    d.ctx.module = frame.module;
    if (d.moduleExitSinks.length > 0) d.emit(d.moduleExitSinks, 'onModuleExit', frame.module, outputs, true);
    this.fwdTop = frame.parent;
    if (frame.implicit) this.implicitOpen--;
    this.updateCtx();
  }

  enterModule(mod: TfjsModule, inputs: unknown): Frame {
    // An implicit frame that is not an ancestor of this module is over (its
    // last output layer was not recognised): close it rather than nest under it.
    while (this.fwdTop !== null && this.fwdTop.implicit && !this.fwdTop.module.isAncestorOf(mod)) {
      this.closeFrame(this.fwdTop, this.fwdTop.outputs);
    }
    const top = this.fwdTop;
    const parent = mod.parent;
    if (parent !== null && (top === null || top.module !== parent)) {
      // Ancestors whose own `call` did not run: a root model driven by
      // fit/predict/evaluate, or a Sequential nested in a Sequential (tfjs
      // flattens its layers into the outer graph). Open them implicitly,
      // outermost first.
      const missing: TfjsModule[] = [];
      for (let p: TfjsModule | null = parent; p !== null && (top === null || p !== top.module); p = p.parent) missing.push(p);
      for (let i = missing.length - 1; i >= 0; i--) this.openFrame(missing[i]!, true, inputs);
    }
    return this.openFrame(mod, false, inputs);
  }

  /** `out` null: the module's call threw (its Exit fires with no outputs). */
  exitModule(frame: Frame, out: unknown): void {
    // Implicit frames opened inside this call and still open end with it.
    while (this.fwdTop !== null && this.fwdTop !== frame && frame.depth < this.fwdTop.depth) {
      this.closeFrame(this.fwdTop, this.fwdTop.outputs);
    }
    if (this.fwdTop !== frame) return; // already closed by a scope end
    const outputs = out === null || this.dispatch.moduleExitSinks.length === 0 ? [] : this.identity.refsOf(out);
    this.closeFrame(frame, outputs);
    if (out === null) return;
    // A finished output layer may complete an implicitly opened ancestor.
    let done: Frame = frame;
    let top = this.fwdTop as Frame | null;
    while (top !== null && top.implicit && top.pending !== null && top.pending.delete(done.module.layer)) {
      for (const o of outputs) top.outputs.push(o);
      if (top.pending.size > 0) break;
      this.closeFrame(top, top.outputs);
      done = top;
      top = this.fwdTop;
    }
  }

  // ------------------------------------------------------------ optimizers

  optimizerStart(ref: TfjsOptimizer): void {
    this.optimizerDepth++;
    this.updateCtx();
    const d = this.dispatch;
    d.emit(d.optStartSinks, 'onOptimizerStepStart', ref);
  }

  optimizerEnd(ref: TfjsOptimizer): void {
    const d = this.dispatch;
    d.ctx.step++;
    d.emit(d.optEndSinks, 'onOptimizerStepEnd', ref);
    this.optimizerDepth--;
    this.updateCtx();
  }
}
