// Child process for bench/pickle.bench.mjs: times PyTorch's MemoryViz.js (pytorch.org/memory_viz)
// loading a snapshot in Node — its unpickler, annotate_snapshot, and process_alloc_data for the
// default "Active Memory Timeline" view — the work it does before it can draw anything.
//
// memscope does not ship MemoryViz.js: fetch torch/utils/viz/MemoryViz.js from a PyTorch checkout
// yourself and point MEMSCOPE_MEMORYVIZ_JS at it. It is a browser ES module that imports d3 from a
// CDN and builds its page at load, so it cannot be imported here; this script cuts those four
// top-level functions out of the file's text at run time and evaluates just them.
// usage: MEMSCOPE_MEMORYVIZ_JS=/path/MemoryViz.js node bench/memoryviz-child.mjs FILE
import { readFileSync } from 'node:fs';

const NEEDED = ['version_space', 'annotate_snapshot', 'process_alloc_data', 'unpickle'];

/** The text of top-level `function NAME(…) {…}` (it ends at the first `}` in column 0). */
function topLevelFunction(source, name) {
  const start = source.search(new RegExp(`^(export )?function ${name}\\(`, 'm'));
  if (start < 0) throw new Error(`MemoryViz.js: no top-level function ${name} (a newer layout?)`);
  const end = source.indexOf('\n}\n', start);
  if (end < 0) throw new Error(`MemoryViz.js: cannot find the end of ${name}`);
  return source.slice(start, end + 2).replace(/^export /, '');
}

export function loadMemoryViz(path) {
  const source = readFileSync(path, 'utf8');
  const body = NEEDED.map((n) => topLevelFunction(source, n)).join('\n');
  return new Function(`${body}\nreturn { unpickle, annotate_snapshot, process_alloc_data };`)();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [file] = process.argv.slice(2);
  const viz = loadMemoryViz(process.env.MEMSCOPE_MEMORYVIZ_JS);
  const start = performance.now();
  const buf = readFileSync(file);
  const t0 = performance.now();
  // MemoryViz gets an ArrayBuffer from FileReader / fetch.
  const snapshot = viz.unpickle(buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength));
  const t1 = performance.now();
  viz.annotate_snapshot(snapshot);
  const t2 = performance.now();
  const device = Math.max(0, snapshot.device_traces.findIndex((t) => t.length > 0));
  const timeline = viz.process_alloc_data(snapshot, device, false, 15000);
  const t3 = performance.now();
  console.log(
    JSON.stringify({
      readMs: t0 - start,
      unpickleMs: t1 - t0,
      annotateMs: t2 - t1,
      timelineMs: t3 - t2,
      totalMs: t3 - start,
      maxRssBytes: process.resourceUsage().maxRSS * 1024,
      segments: snapshot.segments.length,
      timelineElements: timeline.elements_length,
    }),
  );
}
