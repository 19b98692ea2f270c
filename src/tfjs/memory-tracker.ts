import { MemoryTracker as AdapterMemoryTracker, type MemoryTrackerOptions, type MonitorOptions } from '../tracking/op-tracker.js';
import { tfjsAdapter } from './adapter.js';

/**
 * PyTorch's MemoryTracker for TensorFlow.js: operator-level allocated /
 * active / reserved traces of one TFJS backend. See docs/OPERATOR_TRACES.md.
 *
 *     const tracker = new MemoryTracker();
 *     tracker.startMonitor(model, { optimizer });
 *     train();
 *     tracker.stop();
 *     console.log(tracker.summaryString());
 *     tracker.showTraces('traces/');
 *
 * A compiled model's optimizer is instrumented with it unless another is
 * given, so `fit` / `trainOnBatch` updates are named `.optimizer.` and counted as steps.
 */
export class MemoryTracker extends AdapterMemoryTracker {
  constructor(options: MemoryTrackerOptions = {}) {
    super(tfjsAdapter, options);
  }

  override startMonitor(model: unknown, options: MonitorOptions = {}): this {
    if (options.optimizer !== undefined) return super.startMonitor(model, options);
    const compiled = (model as { optimizer?: unknown } | null)?.optimizer;
    const isOptimizer =
      typeof compiled === 'object' && compiled !== null && typeof (compiled as { applyGradients?: unknown }).applyGradients === 'function';
    return super.startMonitor(model, isOptimizer ? { ...options, optimizer: compiled } : options);
  }
}
