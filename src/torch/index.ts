// memscope/torch: read the files PyTorch writes (pickled CUDA memory snapshots, profiler traces)
// without Python, and write snapshots PyTorch's tools read. Browser-safe: file I/O lives in *-node.ts.
export * from './pickle/reader.js';
// writer: export * from "./pickle/writer.js" (landing next)
export * from './snapshot.js';
