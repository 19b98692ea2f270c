// memscope/node: the file-reading and file-writing helpers, which need Node's
// file system. Everything else in memscope runs in browsers too.
export { MemoryProfileTimeline } from './analysis/timeline-node.js';
export { dumpSnapshot, saveSegmentUsage, saveMemoryUsage, encodeSnapshot } from './allocator/snapshot-node.js';
export { readSnapshotFile } from './allocator/read-snapshot-node.js';
export { openMemoryFile, openSnapshotFile, type MemoryFile, type OpenOptions } from './torch/open-node.js';
export { readChromeTraceFile, readJsonTraceFile } from './torch/chrome-trace-node.js';
export type { FileReadOptions, ReadProgress } from './core/file-chunks-node.js';
export { saveOpTraceStats, loadOpTraceStats, writeOpTracePlots, type WrittenTraces } from './tracking/op-traces-node.js';
export { readCaptureFile } from './capture/read-node.js';
export { FileCaptureSink } from './capture/file-sink-node.js';
export { loadAllocatorPolicy } from './allocator/policy-module-node.js';
