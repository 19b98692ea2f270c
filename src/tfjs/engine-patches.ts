import type { KernelEvent } from '../core/events.js';
import {
  type PatchedEngineMethod,
  type TfEngine,
  type TfTensor,
  PATCHED_ENGINE_METHODS,
  isTensorLike,
  isVariableLike,
} from './engine-types.js';
import { type TfLayer, type TfjsStorage, TfjsModule, TfjsOptimizer } from './refs.js';
import type { Attribution, EndingScope, Frame, GradientRun } from './attribution.js';
import type { SinkDispatch } from './sink-dispatch.js';
import type { StorageIdentity } from './storage-identity.js';

/**
 * Engine patching for one installation: the wrappers memscope puts on the TFJS engine's prototype,
 * on variable classes (`assign`), and on instrumented layers (`call`) and optimizers
 * (`applyGradients`), all installed with the first session; and putting back exactly what each
 * replaced. Every wrapper runs the original whatever memscope's own code
 * does: a failure inside memscope is counted and logged once, and a user exception passes through
 * after the bookkeeping it interrupts is closed. The per-tensor wrappers call storage identity
 * directly.
 */

type Fn = (...args: never[]) => unknown;

interface InstanceWrap {
  readonly target: Record<string, unknown>;
  readonly key: string;
  readonly hadOwn: boolean;
  readonly previous: unknown;
  readonly wrapper: unknown;
}

/**
 * A customGrad kernel has no registered name; the engine (and its profiler)
 * names it after the enclosing scope — the op that used customGrad, e.g.
 * 'softmaxCrossEntropy__op' — and memscope keeps that name (consumers pin
 * it); outside any scope, where the engine says '', memscope says 'customGrad'.
 */
function compositeKernelName(scopeName: string | undefined): string {
  return scopeName == null || scopeName === '' ? 'customGrad' : scopeName;
}

export class EnginePatches {
  private readonly engineOriginals = new Map<PatchedEngineMethod, Fn>();
  /** Wrappers now on the engine prototype. */
  private readonly engineWrappers = new Map<PatchedEngineMethod, Fn>();
  private readonly engineProto: Record<string, unknown>;
  /** Prototypes whose `assign` memscope replaced → the original. */
  private readonly assignOriginals = new Map<Record<string, unknown>, { original: Fn; wrapper: Fn }>();
  private readonly instanceWraps: InstanceWrap[] = [];
  /** The prototype of the last variable patchVariableClassOf looked at (its class is instrumented). */
  private lastVariableProto: object | null = null;

  readonly modules = new WeakMap<object, TfjsModule>();
  readonly optimizers = new WeakMap<object, TfjsOptimizer>();

  constructor(
    engine: TfEngine,
    private readonly dispatch: SinkDispatch,
    private readonly identity: StorageIdentity,
    private readonly attribution: Attribution,
  ) {
    this.engineProto = Object.getPrototypeOf(engine) as Record<string, unknown>;
    this.patchEngine();
  }

  /** For tests: the function memscope replaced (by identity). */
  originalEngineMethod(name: PatchedEngineMethod): unknown {
    return this.engineOriginals.get(name);
  }

  // ------------------------------------------------------------ layers and optimizers

  /** Instruments `layer` and its nested layers; returns its module. */
  instrumentModule(layer: TfLayer, name: string, parent: TfjsModule | null): TfjsModule {
    let mod = this.modules.get(layer);
    if (mod !== undefined) {
      if (parent !== null && mod.parent === null && !mod.isAncestorOf(parent)) mod.adoptInto(parent, name);
    } else {
      const path = parent === null ? name : `${parent.path}.${name}`;
      const className = layer.getClassName?.() ?? layer.constructor.className ?? layer.constructor.name;
      mod = new TfjsModule(layer, path, className, parent, this.identity.toRef);
      this.modules.set(layer, mod);
      this.attribution.moduleCount++;
      if (parent !== null) parent.children.push(mod);
      this.wrapLayerCall(layer, mod);
    }
    // Also for a known module: layers added since (Sequential.add) join now.
    const children = Array.isArray(layer.layers) ? layer.layers : [];
    for (const child of children) {
      if (child == null || typeof child.call !== 'function') continue;
      // InputLayers never run (executors feed their outputs), so they are not modules.
      const childClass = child.getClassName?.() ?? child.constructor.name;
      if (childClass === 'InputLayer') continue;
      const known = this.modules.get(child);
      if (known !== undefined && known.parent === mod) continue;
      this.instrumentModule(child, child.name, mod);
    }
    return mod;
  }

  private wrapLayerCall(layer: TfLayer, mod: TfjsModule): void {
    const previous = layer.call;
    const d = this.dispatch;
    const attribution = this.attribution;
    const wrapper = function (this: unknown, inputs: unknown, kwargs: unknown): unknown {
      if (!d.active) return previous.call(this, inputs, kwargs);
      let frame: Frame | null = null;
      try {
        frame = attribution.enterModule(mod, inputs);
      } catch (err) {
        d.internalError(err);
      }
      let out: unknown;
      try {
        out = previous.call(this, inputs, kwargs);
      } catch (userError) {
        if (frame !== null) {
          try {
            attribution.exitModule(frame, null);
          } catch (err) {
            d.internalError(err);
          }
        }
        throw userError;
      }
      if (frame !== null) {
        try {
          attribution.exitModule(frame, out);
        } catch (err) {
          d.internalError(err);
        }
      }
      return out;
    };
    this.wrapInstance(layer as unknown as Record<string, unknown>, 'call', wrapper);
  }

  instrumentOptimizer(optimizer: object): TfjsOptimizer {
    const existing = this.optimizers.get(optimizer);
    if (existing !== undefined) return existing;
    const ctor = (optimizer as { constructor?: { className?: string; name?: string } }).constructor;
    const className = (optimizer as { getClassName?: () => string }).getClassName?.() ?? ctor?.className ?? ctor?.name ?? 'Optimizer';
    const ref = new TfjsOptimizer(optimizer, className, this.identity.toRef, isTensorLike);
    this.optimizers.set(optimizer, ref);
    const previous = (optimizer as { applyGradients: Fn }).applyGradients as (this: unknown, g: unknown) => unknown;
    const d = this.dispatch;
    const attribution = this.attribution;
    const wrapper = function (this: unknown, grads: unknown): unknown {
      if (!d.active) return previous.call(this, grads);
      try {
        attribution.optimizerStart(ref);
      } catch (err) {
        d.internalError(err);
      }
      try {
        return previous.call(this, grads);
      } finally {
        try {
          attribution.optimizerEnd(ref);
        } catch (err) {
          d.internalError(err);
        }
      }
    };
    this.wrapInstance(optimizer as Record<string, unknown>, 'applyGradients', wrapper);
    return ref;
  }

  private wrapInstance(target: Record<string, unknown>, key: string, wrapper: unknown): void {
    const hadOwn = Object.prototype.hasOwnProperty.call(target, key);
    const previous = target[key];
    target[key] = wrapper;
    this.instanceWraps.push({ target, key, hadOwn, previous, wrapper });
  }

  // ---------------------------------------------------------------- variables

  /** Finds the prototype that defines `assign` for this variable's class and patches it once. */
  patchVariableClassOf(v: TfTensor): void {
    // incRef runs on every assign (an optimizer step assigns every weight and
    // moment): the class seen last is almost always this one.
    const own = Object.getPrototypeOf(v) as Record<string, unknown> | null;
    if (own === this.lastVariableProto) return;
    this.lastVariableProto = own;
    let proto = own;
    while (proto !== null && !Object.prototype.hasOwnProperty.call(proto, 'assign')) {
      proto = Object.getPrototypeOf(proto) as Record<string, unknown> | null;
    }
    if (proto === null || this.assignOriginals.has(proto)) return;
    const original = proto['assign'] as (this: TfTensor, value: TfTensor) => void;
    if (typeof original !== 'function') return;
    const d = this.dispatch;
    const identity = this.identity;
    const wrapper = function (this: TfTensor, value: TfTensor): void {
      if (!d.active) return original.call(this, value);
      let previous: TfjsStorage | undefined;
      try {
        previous = identity.beforeAssign(this);
      } catch (err) {
        d.internalError(err);
      }
      const outer = identity.assigning;
      identity.assigning = this;
      try {
        original.call(this, value);
      } finally {
        identity.assigning = outer;
      }
      try {
        identity.afterAssign(this, previous);
      } catch (err) {
        d.internalError(err);
      }
    };
    proto['assign'] = wrapper;
    this.assignOriginals.set(proto, { original: original as Fn, wrapper: wrapper as Fn });
  }

  // ---------------------------------------------------------------- the engine

  private patchEngine(): void {
    const proto = this.engineProto;
    for (const name of PATCHED_ENGINE_METHODS) {
      const original = proto[name];
      if (typeof original !== 'function') throw new Error(`engine method ${name} is missing`);
      this.engineOriginals.set(name, original as Fn);
    }
    const d = this.dispatch;
    const identity = this.identity;
    const attribution = this.attribution;
    const patches = this;
    const o = <K extends PatchedEngineMethod>(k: K) => this.engineOriginals.get(k) as unknown as TfEngine[K];
    const trackTensor = o('trackTensor');
    const disposeTensor = o('disposeTensor');
    const removeDataId = o('removeDataId');
    const moveData = o('moveData');
    const runKernelFunc = o('runKernelFunc');
    const addTapeNode = o('addTapeNode');
    const gradients = o('gradients');
    const startScope = o('startScope');
    const endScope = o('endScope');
    const incRef = o('incRef');

    const wrappers: { [K in PatchedEngineMethod]: TfEngine[K] } = {
      trackTensor(this: TfEngine, a, backend) {
        // One call site for the original, so V8 can inline it here as it did into TFJS's callers.
        const active = d.active;
        const before = active ? this.state.numDataBuffers : 0;
        trackTensor.call(this, a, backend);
        if (!active) return;
        try {
          identity.onTrack(this, a, this.state.numDataBuffers !== before, backend);
        } catch (err) {
          d.internalError(err);
        }
      },
      incRef(this: TfEngine, a, backend) {
        incRef.call(this, a, backend);
        // A new variable (makeVariable) or an assign: make sure its class's
        // assign is instrumented, whichever tfjs-core copy it came from.
        if (d.active && isVariableLike(a)) {
          try {
            patches.patchVariableClassOf(a);
          } catch (err) {
            d.internalError(err);
          }
        }
      },
      disposeTensor(this: TfEngine, a) {
        disposeTensor.call(this, a);
        if (!d.active) return;
        try {
          identity.onDispose(a);
        } catch (err) {
          d.internalError(err);
        }
      },
      removeDataId(this: TfEngine, dataId, backend) {
        const before = this.state.numDataBuffers;
        removeDataId.call(this, dataId, backend);
        if (!d.active) return;
        try {
          identity.onDataIdRemoved(this, dataId, backend, this.state.numDataBuffers !== before);
        } catch (err) {
          d.internalError(err);
        }
      },
      moveData(this: TfEngine, backend, dataId) {
        const from = d.active ? this.state.tensorInfo.get(dataId)?.backend : undefined;
        moveData.call(this, backend, dataId);
        if (!d.active) return;
        try {
          identity.onMoved(this, dataId, from);
        } catch (err) {
          d.internalError(err);
        }
      },
      runKernelFunc(this: TfEngine, params) {
        if (!d.active) return runKernelFunc.call(this, params);
        const ctx = d.ctx;
        const previousKernel = ctx.kernel;
        let start: KernelEvent | null = null;
        try {
          ctx.kernel = params.kernelName ?? compositeKernelName(this.state.activeScope?.name);
          if (d.wantKernels) start = attribution.kernelStart(ctx.kernel, params);
          else if (d.meetKernelInputs) identity.meetInputs(params.inputs);
        } catch (err) {
          d.internalError(err);
        }
        let out: TfTensor | TfTensor[];
        try {
          out = runKernelFunc.call(this, params);
        } catch (userError) {
          if (start !== null) {
            try {
              attribution.kernelEnd(start, null);
            } catch (err) {
              d.internalError(err);
            }
          }
          ctx.kernel = previousKernel;
          throw userError;
        }
        if (start !== null) {
          try {
            attribution.kernelEnd(start, out);
          } catch (err) {
            d.internalError(err);
          }
        }
        ctx.kernel = previousKernel;
        return out;
      },
      addTapeNode(this: TfEngine, kernelName, inputs, outputs, gradientsFunc, saved, attrs) {
        // Six named parameters (engine.addTapeNode's own), not a rest array: one call per recorded op.
        addTapeNode.call(this, kernelName, inputs, outputs, gradientsFunc, saved, attrs);
        if (!d.active) return;
        try {
          attribution.onTapeNode(this);
        } catch (err) {
          d.internalError(err);
        }
      },
      gradients(this: TfEngine, f, xs, dy, allowNoGradients) {
        if (!d.active) return gradients.call(this, f, xs, dy, allowNoGradients);
        let run: GradientRun | null = null;
        try {
          run = attribution.gradientStart(xs);
        } catch (err) {
          d.internalError(err);
        }
        let result: ReturnType<TfEngine['gradients']>;
        try {
          result = gradients.call(this, f, xs, dy, allowNoGradients);
        } catch (userError) {
          if (run !== null) {
            try {
              attribution.gradientEnd(run, xs, null);
            } catch (err) {
              d.internalError(err);
            }
          }
          throw userError;
        }
        if (run !== null) {
          try {
            attribution.gradientEnd(run, xs, result);
          } catch (err) {
            d.internalError(err);
          }
        }
        return result;
      },
      startScope(this: TfEngine, name) {
        startScope.call(this, name);
        // One scope per op call: only the engine's own forward/backward
        // tidies matter unless a sink wants scope events.
        if (!d.active || !(d.watchScopeStart || (attribution.awaitsGradientScope && (name === 'forward' || name === 'backward')))) return;
        try {
          attribution.onScopeStart(this);
        } catch (err) {
          d.internalError(err);
        }
      },
      endScope(this: TfEngine, result) {
        if (!d.active || (!d.watchScopeEnd && attribution.implicitOpen === 0 && attribution.markedTop !== this.state.activeScope)) {
          return endScope.call(this, result);
        }
        let ended: EndingScope | null = null;
        try {
          ended = attribution.beforeScopeEnd(this);
        } catch (err) {
          d.internalError(err);
        }
        endScope.call(this, result);
        if (ended === null) return;
        try {
          attribution.afterScopeEnd(this, ended);
        } catch (err) {
          d.internalError(err);
        }
      },
    };
    for (const name of PATCHED_ENGINE_METHODS) {
      const w = wrappers[name] as unknown as Fn;
      this.engineWrappers.set(name, w);
      proto[name] = w;
    }
  }

  /**
   * Restores every patched method to the exact function it replaced, and
   * removes every per-instance wrapper. A method someone else re-patched on
   * top of memscope's wrapper is left alone (restoring it would drop their
   * patch); memscope's wrapper beneath it is a pass-through once
   * `dispatch.active` is false.
   */
  restore(): void {
    const proto = this.engineProto;
    for (const [name, original] of this.engineOriginals) {
      if (proto[name] === this.engineWrappers.get(name)) proto[name] = original;
    }
    for (const [vproto, { original, wrapper }] of this.assignOriginals) {
      if (vproto['assign'] === wrapper) vproto['assign'] = original;
    }
    this.assignOriginals.clear();
    for (let i = this.instanceWraps.length - 1; i >= 0; i--) {
      const w = this.instanceWraps[i]!;
      if (w.target[w.key] !== w.wrapper) continue;
      if (w.hadOwn) w.target[w.key] = w.previous;
      else delete w.target[w.key];
    }
    this.instanceWraps.length = 0;
  }
}
