// memscope/analysis: torch.profiler's memory profiler (MemoryProfile) over a
// recorded event tree. Framework-free and browser-safe; the file-writing
// timeline is in ./timeline-node.js.
export * from './profile-tree.js';
export * from './recorder.js';
export * from './memory-profile.js';
export * from './format.js';
export * from './timeline.js';
