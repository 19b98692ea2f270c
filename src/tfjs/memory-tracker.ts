import { MemoryTracker as AdapterMemoryTracker, type MemoryTrackerOptions } from '../tracking/op-tracker.js';
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
 */
export class MemoryTracker extends AdapterMemoryTracker {
  constructor(options: MemoryTrackerOptions = {}) {
    super(tfjsAdapter, options);
  }
}
