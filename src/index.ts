// memscope's framework-free API. Framework adapters live in subpath exports
// (memscope/tfjs, memscope/torch) so this entry never imports a framework.
export * from './core/index.js';
// MemTracker over any FrameworkAdapter (memscope/tfjs exports one bound to TFJS).
export { MemTracker, type SnapshotDisplayOptions, type ModulewiseDisplayOptions } from './tracking/mem-tracker.js';
export * from './tracking/mem-types.js';
// Operator-level traces (PyTorch's MemoryTracker) over any FrameworkAdapter, and its stats format.
export { MemoryTracker, NO_LAYER, type MemoryTrackerOptions, type MonitorOptions, type RenderedTraces } from './tracking/op-tracker.js';
export * from './tracking/op-traces.js';
