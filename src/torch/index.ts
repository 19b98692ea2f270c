// memscope/torch: read the files PyTorch writes (pickled CUDA memory snapshots, profiler traces)
// without Python, and write snapshots PyTorch's tools read. Browser-safe: file I/O lives in *-node.ts.
export * from './pickle/reader.js';
export * from './pickle/writer.js';
export * from './pytorch-vocabulary.js';
export * from './snapshot.js';
export { normaliseSnapshot, readSnapshot, type ReadSnapshotOptions } from './snapshot-decoder.js';
export * from './memory-trace.js';
export * from './chrome-trace.js';
export * from './memory-timeline.js';
export * from './snapshot-analysis.js';
export * from './snapshot-flamegraph.js';
