// Child process for bench/pickle.bench.mjs: the work `memscope summary` does on a snapshot, end to
// end in a fresh process (read the file with readSnapshotFile, decode, normalise, compute the summary figures), then
// prints its own timings and peak RSS as JSON. usage: node bench/pickle-child.mjs FILE [generic]
import { readFileSync } from 'node:fs';
import { normaliseSnapshot, readPickle } from '../dist/torch/index.js';
import { readSnapshotFile } from '../dist/torch/snapshot-node.js';

const start = performance.now();
const [file, mode] = process.argv.slice(2);
// readSnapshotFile reads the file in 8 MiB pieces.
const bytes = mode === 'generic' ? readFileSync(file) : null;
const t0 = performance.now();
const snapshot = mode === 'generic' ? normaliseSnapshot(readPickle(bytes)) : readSnapshotFile(file);
const t1 = performance.now();
let summary = null;
try {
  // The summary's figures, from the analysis module that `memscope summary` uses (when built).
  const a = await import('../dist/torch/snapshot-analysis.js');
  const totals = a.snapshotTotals(snapshot);
  const largest = a.largestAllocations(snapshot, 10);
  const byFrame = a.totalsByFrame(snapshot).slice(0, 10);
  summary = { totals: Object.keys(totals).length, largest: largest.length, byFrame: byFrame.length };
} catch (e) {
  summary = { error: String(e) };
}
const t2 = performance.now();
const events = snapshot.traces.reduce((n, t) => n + t.count, 0);
console.log(
  JSON.stringify({
    readMs: t0 - start,
    decodeMs: t1 - t0,
    summaryMs: t2 - t1,
    totalMs: t2 - start,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    // CPU time of the whole process (all threads, incl. GC helpers): steadier than wall time on a busy machine.
    cpuMs: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
    segments: snapshot.segments.length,
    blocks: snapshot.blocks.count,
    events,
    stacks: snapshot.stacks.count,
    summary,
  }),
);
