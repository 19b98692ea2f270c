/**
 * Model discovery by wrapping TFJS's prototypes: the program never hands its model or
 * optimizer to memscope, so memscope finds them as they are used. `watch(exports)` takes a
 * TFJS package's exports (tfjs-layers, tfjs-core, tfjs-converter, or the `@tensorflow/tfjs`
 * union that holds them all) and wraps, on their prototypes:
 * - LayersModel `fit`, `fitDataset`, `trainOnBatch`, `evaluate`, `predict`,
 *   `execute` and `apply` (and Sequential's own overrides): the first call on a model (outside another tracked
 *   model's call, so nested models stay children) registers it with
 *   `session.module`, and its compiled optimizer with `session.optimizer`;
 * - Optimizer `minimize` and `applyGradients`: registers the optimizer (custom
 *   training loops without a layers model);
 * - tfjs-converter's GraphModel `predict`, `execute` and `executeAsync`.
 * A top-level inference call (`predict`, `predictOnBatch`, `execute`,
 * `executeAsync`, not inside another tracked call) ends an inference step:
 * `inferenceEnd` is told when it returns (or its promise settles).
 * Every wrapper is removed again by `restore()`.
 *
 * `memscope run` feeds it from Node's module loading (auto-track-node.ts); a page passes its
 * own `tf` (memscope/browser's capture).
 */
/** What auto-tracking needs from an adapter session. */
export interface ModelRegistry {
  module(model: object, name?: string): unknown;
  optimizer(optimizer: object): unknown;
  /** A top-level inference call of kind 'predict', 'execute' or 'executeAsync' finished. */
  inferenceEnd?(kind: string): void;
}

const INFERENCE_KIND: Record<string, string> = { predict: 'predict', predictOnBatch: 'predict', execute: 'execute', executeAsync: 'executeAsync' };

/** Which TFJS package an exports object is: tfjs-layers, tfjs-converter or tfjs-core. */
export type TfjsPackage = 'layers' | 'converter' | 'core';

export interface ModelTracking {
  /** Wraps the prototypes found in a TFJS package's exports (only those of `only` when given). */
  watch(exports: unknown, only?: TfjsPackage): void;
  /** Removes every wrapper. */
  restore(): void;
}

/**
 * Wrappers whose tracking was restored while another wrapper lay over them (two trackings stopped
 * in the order they started): they only forward now, and a restore that would put one back puts
 * back what it wrapped instead.
 */
const retired = new WeakMap<object, { original: unknown; own: boolean }>();

/**
 * Puts `wrapped` on `proto[name]` over `original` (an own property of `proto` when `own`); returns
 * the restore, which also retires `wrapped` when another wrapper lies over it.
 */
function install(proto: Record<string, unknown>, name: string, wrapped: object, original: unknown, own: boolean, retire: () => void): () => void {
  proto[name] = wrapped;
  return () => {
    retire();
    if (proto[name] !== wrapped) {
      retired.set(wrapped, { original, own });
      return;
    }
    let value = original;
    let isOwn = own;
    for (let r = typeof value === 'function' ? retired.get(value) : undefined; r !== undefined; r = typeof value === 'function' ? retired.get(value) : undefined) {
      value = r.original;
      isOwn = r.own;
    }
    if (isOwn) proto[name] = value;
    else delete proto[name];
  };
}

export function createModelTracking(session: ModelRegistry, onError: (err: unknown) => void): ModelTracking {
  const restores: Array<() => void> = [];
  const models = new WeakSet<object>();
  const optimizers = new WeakSet<object>();
  let depth = 0;

  const trackOptimizer = (opt: unknown): void => {
    if (opt == null || typeof opt !== 'object' || optimizers.has(opt)) return;
    optimizers.add(opt);
    try {
      session.optimizer(opt);
    } catch (err) {
      onError(err);
    }
  };
  const trackModel = (model: object): void => {
    if (models.has(model)) return;
    models.add(model);
    try {
      session.module(model, (model as { name?: string }).name);
    } catch (err) {
      onError(err);
    }
  };

  /**
   * Wraps `proto[name]`. An inherited method (LayersModel's `apply` comes from
   * Layer) is wrapped with an own property on `proto`, so plain layers are not
   * affected; restore then deletes that property again.
   */
  const inferenceEnd = (kind: string): void => {
    try {
      session.inferenceEnd?.(kind);
    } catch (err) {
      onError(err);
    }
  };

  const wrap = (proto: Record<string, unknown>, name: string, before: (self: object, args: unknown[]) => void, opts: { inherited?: boolean; nests?: boolean } = {}): void => {
    const inherited = opts.inherited ?? false;
    // Model calls nest (a model inside a model's call is a child); an optimizer's minimize does not.
    const nests = opts.nests ?? true;
    const original = proto[name];
    const own = Object.prototype.hasOwnProperty.call(proto, name);
    if (typeof original !== 'function' || (!own && !inherited)) return;
    const kind = INFERENCE_KIND[name];
    let active = true;
    const wrapped = function (this: object, ...args: unknown[]): unknown {
      if (!active) return (original as (...a: unknown[]) => unknown).apply(this, args);
      if (!nests) {
        before(this, args);
        return (original as (...a: unknown[]) => unknown).apply(this, args);
      }
      const topLevel = depth === 0;
      if (topLevel) before(this, args);
      depth++;
      let result: unknown;
      try {
        result = (original as (...a: unknown[]) => unknown).apply(this, args);
      } catch (err) {
        depth--;
        throw err;
      }
      if (result instanceof Promise) {
        return result.finally(() => {
          depth--;
          if (topLevel && kind) inferenceEnd(kind);
        });
      }
      depth--;
      if (topLevel && kind) inferenceEnd(kind);
      return result;
    };
    restores.push(install(proto, name, wrapped, original, own, () => (active = false)));
  };

  /**
   * Wraps an optimizer class's own `applyGradients`: the first call on an optimizer registers it,
   * which puts the session's wrapper on the instance, and that first step then runs through it so
   * it is seen as a step too; later calls reach here from the instance's wrapper and go straight on.
   */
  const wrapApplyGradients = (proto: Record<string, unknown>): void => {
    const original = proto['applyGradients'];
    if (typeof original !== 'function' || !Object.prototype.hasOwnProperty.call(proto, 'applyGradients')) return;
    let active = true;
    const wrapped = function (this: Record<string, unknown>, ...args: unknown[]): unknown {
      if (active && !optimizers.has(this)) {
        trackOptimizer(this);
        const own = Object.prototype.hasOwnProperty.call(this, 'applyGradients') ? this['applyGradients'] : undefined;
        if (typeof own === 'function' && own !== wrapped) return (own as (...a: unknown[]) => unknown).apply(this, args);
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    };
    restores.push(install(proto, 'applyGradients', wrapped, original, true, () => (active = false)));
  };

  const seenExports = new WeakSet<object>();
  const watch = (exports: unknown, only?: TfjsPackage): void => {
    if (exports == null || typeof exports !== 'object' || seenExports.has(exports)) return;
    const ex = exports as Record<string, unknown>;
    const is = (pkg: TfjsPackage): boolean => only === undefined || only === pkg;
    let matched = false;
    if (is('layers') && typeof ex.LayersModel === 'function') {
      matched = true;
      const proto = (ex.LayersModel as { prototype: Record<string, unknown> }).prototype;
      const beforeModel = (self: object): void => {
        trackModel(self);
        trackOptimizer((self as { optimizer?: unknown }).optimizer);
      };
      for (const m of ['fit', 'fitDataset', 'trainOnBatch', 'evaluate', 'predict', 'predictOnBatch', 'execute']) wrap(proto, m, beforeModel);
      // Custom loops call `model.apply(x)` inside `optimizer.minimize`. Building a
      // functional model also calls `apply`, on symbolic tensors (no data): a
      // nested model used that way is a child, not a root, so only concrete calls count.
      const beforeConcreteApply = (self: object, args: unknown[]): void => {
        if (hasConcreteTensor(args[0])) beforeModel(self);
      };
      wrap(proto, 'apply', beforeConcreteApply, { inherited: true });
      // Sequential overrides several of these; wrap its own definitions too.
      if (typeof ex.Sequential === 'function') {
        const seq = (ex.Sequential as { prototype: Record<string, unknown> }).prototype;
        for (const m of ['fit', 'fitDataset', 'trainOnBatch', 'evaluate', 'predict', 'predictOnBatch']) wrap(seq, m, beforeModel);
        wrap(seq, 'apply', beforeConcreteApply);
      }
    }
    if (is('converter') && typeof ex.GraphModel === 'function') {
      matched = true;
      // A graph model has no layers to register: its calls only delimit inference steps.
      const proto = (ex.GraphModel as { prototype: Record<string, unknown> }).prototype;
      for (const m of ['predict', 'execute', 'executeAsync']) wrap(proto, m, () => {});
    }
    if (is('core') && typeof ex.Optimizer === 'function') {
      matched = true;
      const proto = (ex.Optimizer as { prototype: Record<string, unknown> }).prototype;
      wrap(proto, 'minimize', (self) => trackOptimizer(self), { nests: false });
      // Custom loops that compute gradients themselves (tf.variableGrads) call `applyGradients`,
      // which each optimizer class defines for itself: each exported class's own is wrapped.
      for (const descriptor of Object.values(Object.getOwnPropertyDescriptors(ex))) {
        const cls = descriptor.value as { prototype?: unknown } | undefined;
        if (typeof cls !== 'function' || typeof cls.prototype !== 'object' || cls.prototype === null) continue;
        if (proto.isPrototypeOf(cls.prototype)) wrapApplyGradients(cls.prototype as Record<string, unknown>);
      }
    }
    if (matched) seenExports.add(exports);
  };

  return {
    watch: (exports, only) => {
      try {
        watch(exports, only);
      } catch (err) {
        onError(err);
      }
    },
    restore() {
      for (const r of restores.reverse()) r();
      restores.length = 0;
    },
  };
}

/** True for a tensor with data (or a list/map holding one); false for symbolic tensors. */
function hasConcreteTensor(x: unknown): boolean {
  if (x == null || typeof x !== 'object') return false;
  if (Array.isArray(x)) return x.some(hasConcreteTensor);
  if ('dataId' in x && (x as { dataId?: unknown }).dataId != null) return true;
  return false;
}
