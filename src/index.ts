// memscope's framework-free API. Framework adapters live in subpath exports
// (memscope/tfjs, memscope/torch) so this entry never imports a framework.
export * from './core/index.js';
// MemTracker over any FrameworkAdapter (memscope/tfjs exports one bound to TFJS).
export { MemTracker, type SnapshotDisplayOptions, type ModulewiseDisplayOptions } from './tracking/mem-tracker.js';
export * from './tracking/mem-types.js';
