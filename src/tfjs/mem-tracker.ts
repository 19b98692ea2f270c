import { MemTracker as FrameworkFreeMemTracker } from '../tracking/mem-tracker.js';
import { tfjsAdapter } from './adapter.js';
import { globalEngine } from './engine-types.js';

/**
 * MemTracker bound to TensorFlow.js. `trackExternal(model)` also tracks the
 * optimizer the model was compiled with, so `fit`/`trainOnBatch` steps are
 * seen as optimizer steps without naming the optimizer twice.
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

  protected override companionsOf(model: unknown): unknown[] {
    const optimizer = (model as { optimizer?: unknown }).optimizer;
    const isOptimizer =
      typeof optimizer === 'object' &&
      optimizer !== null &&
      typeof (optimizer as { applyGradients?: unknown }).applyGradients === 'function';
    return isOptimizer ? [optimizer] : [];
  }
}
