import { MemTracker as FrameworkFreeMemTracker } from '../tracking/mem-tracker.js';
import { tfjsAdapter } from './adapter.js';
import { globalEngine } from './engine-types.js';

/**
 * MemTracker bound to TensorFlow.js. `trackExternal(model)` also tracks the
 * optimizer the model was compiled with — also when it is compiled (again) while
 * tracking — so `fit`/`trainOnBatch` steps are seen as optimizer steps without
 * naming the optimizer twice.
 *
 * ```ts
 * import { MemTracker } from 'memscope/tfjs';
 * const tracker = new MemTracker();
 * tracker.trackExternal(model);
 * await tracker.track(() => model.fit(xs, ys, { epochs: 1 }));
 * tracker.displayModulewiseSnapshots({ units: 'KiB', tabulate: true });
 * ```
 */
export class MemTracker extends FrameworkFreeMemTracker {
  constructor() {
    super(tfjsAdapter);
  }

  /** A program with no trainable variable has no model to register: nothing to warn about. */
  protected override hasWeights(): boolean {
    const vars = globalEngine()?.state.registeredVariables ?? {};
    return Object.values(vars).some((v) => v != null && !v.isDisposed && (v as { trainable?: boolean }).trainable !== false);
  }

  /** Wraps the model's own `compile` while tracking: a model compiled then gets a new optimizer. */
  protected override watchCompanions(model: unknown, changed: () => void): (() => void) | null {
    const target = model as Record<string, unknown>;
    const previous = target['compile'];
    if (typeof previous !== 'function') return null;
    const hadOwn = Object.prototype.hasOwnProperty.call(target, 'compile');
    const wrapper = function (this: unknown, ...args: unknown[]): unknown {
      const out = (previous as (...a: unknown[]) => unknown).apply(this, args);
      try {
        changed();
      } catch (err) {
        console.warn('memscope: MemTracker could not track the optimizer of a model compiled while tracking:', err);
      }
      return out;
    };
    target['compile'] = wrapper;
    return () => {
      // Another wrapper put on after this one stays; this one then only forwards.
      if (target['compile'] !== wrapper) return;
      if (hadOwn) target['compile'] = previous;
      else delete target['compile'];
    };
  }

  protected override companionsOf(model: unknown): unknown[] {
    const optimizer = (model as { optimizer?: unknown }).optimizer;
    const isOptimizer =
      typeof optimizer === 'object' &&
      optimizer !== null &&
      typeof (optimizer as { applyGradients?: unknown }).applyGradients === 'function';
    return isOptimizer ? [optimizer] : [];
  }
}
