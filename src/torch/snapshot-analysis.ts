/**
 * Analyses of a normalised CUDA memory snapshot (src/torch/snapshot.ts), the questions PyTorch's
 * torch/cuda/_memory_viz.py answers, as plain functions over the model so the CLI, the allocator's
 * saveSegmentUsage/saveMemoryUsage and the browser viewer share them. Each concern has its file
 * under analysis/; this module gathers them. The flame-graph stacks are in snapshot-flamegraph.ts.
 */
export { allocatingFrame, formatFrame, frameLabels, isInformativeFrame, NO_FRAMES, rootFirstFrameLabels } from './analysis/frame-labels.js';
export * from './analysis/totals.js';
export * from './analysis/memory-stats.js';
export * from './analysis/live-allocations.js';
export * from './analysis/fragmentation.js';
export { compareSnapshots, type FrameChange, type SnapshotComparison } from './analysis/compare.js';
export * from './analysis/trace-lines.js';
export * from './analysis/timeline.js';
export * from './analysis/out-of-memory.js';
