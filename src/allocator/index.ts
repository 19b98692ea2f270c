// memscope/allocator: PyTorch's CUDA caching allocator as a model, the
// torch.cuda.memory API over it, replay of PyTorch snapshots, and the binding
// that feeds it a framework's storages. Framework-free and browser-safe; the
// file writers are in snapshot-node.ts / read-snapshot-node.ts.
export { DeviceMemory, DEPRECATION_WARNINGS, type DeviceArg, type DeviceListing, type DeviceMemoryOptions, type RecordMemoryHistoryOptions } from './api.js';
export {
  CUDAPluggableAllocator,
  NativeAllocator,
  allocatorName,
  type AllocatorBackendName,
  type DeviceAllocator,
  type PluggableHooks,
} from './allocator-interface.js';
export { CudaMallocAsyncAllocator, POOL_ALIGN, POOL_GRANULE } from './async-allocator.js';
export {
  BUILTIN_POLICIES,
  recordedFigures,
  replayThroughAllocator,
  type AllocatorFactory,
  type PolicyContext,
  type PolicyFigures,
  type PolicyReplayResult,
} from './policy-replay.js';
export {
  CachingAllocatorModel,
  formatOomSize,
  type AllocatorOptions,
  type Block,
  type HistorySettings,
  type SegmentLayout,
  type TraceEntry,
} from './caching-allocator.js';
export { DEFAULT_CAPACITY, SimulatedDevice, type DeviceBackend } from './device.js';
export {
  DEFAULT_SETTINGS,
  parseAllocatorConf,
  settingsFromSnapshot,
  toSnapshotSettings,
  type AllocatorSettings,
  type SnapshotAllocatorSettings,
} from './settings.js';
export { roundSize, segmentSizeFor, isSmallSize, MIN_BLOCK_SIZE, SMALL_SIZE, SMALL_BUFFER, LARGE_BUFFER, MIN_LARGE_ALLOC, ROUND_LARGE } from './sizes.js';
export { flattenStats, nestedStats, type NestedMemoryStats, type StatValues } from './stats.js';
export { renderMemorySummary, formatSummaryCount, formatSummarySize } from '../torch/memory-summary.js';
export { buildSnapshot, snapshotSegments, type SnapshotDict, type SnapshotBlock, type SnapshotSegment } from './snapshot.js';
export type { BlockState, Frame, KnownTraceAction } from '../torch/pytorch-vocabulary.js';
export {
  parseSnapshot,
  reconstructStartState,
  replaySnapshot,
  whatIf,
  type DeviceReplayReport,
  type ReplayReport,
  type WhatIfResult,
} from './replay.js';
export { AllocatorBinding, type AllocatorBindingOptions } from './binding.js';
export { captureJsStack, parseStack } from './stacks.js';
export { renderMemoryUsage, renderSegmentUsage } from './views.js';
