// Child process for bench/pickle.bench.mjs: times PyTorch's MemoryViz.js (pytorch.org/memory_viz)
// loading a snapshot in Node — its unpickler, annotate_snapshot, and process_alloc_data for the
// default "Active Memory Timeline" view — the work it does before it can draw anything.
//
// memscope does not ship MemoryViz.js: fetch torch/utils/viz/MemoryViz.js from a PyTorch checkout
// yourself and point MEMSCOPE_MEMORYVIZ_JS at it. It is a browser ES module that imports d3 from a
// CDN and builds its page at load, so it cannot be imported here; this script cuts the top-level
// functions it needs out of the file's text at run time and evaluates just them.
//
// Two layouts: older PyTorch keeps process_alloc_data in MemoryViz.js; newer PyTorch moved it and
// its helpers into torch/utils/viz/process_alloc_data.js, a plain script ending in one
// `export {…}` list, which MemoryViz.js imports. For the newer layout fetch that file too and put
// it beside MemoryViz.js (or name it with MEMSCOPE_PROCESS_ALLOC_DATA_JS): all of it is evaluated,
// without its export statements, ahead of MemoryViz.js's functions.
// usage: MEMSCOPE_MEMORYVIZ_JS=/path/MemoryViz.js node bench/memoryviz-child.mjs FILE
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** Always taken from MemoryViz.js; process_alloc_data from whichever file holds it. */
const FROM_MEMORYVIZ = ['version_space', 'annotate_snapshot', 'unpickle'];
/** Taken from MemoryViz.js when it has them: newer ones try JSON first in `unpickle`, then call `unpickleData`. */
const FROM_MEMORYVIZ_IF_PRESENT = ['unpickleData'];

function topLevelFunctionAt(source, name) {
  return source.search(new RegExp(`^(export )?function ${name}\\(`, 'm'));
}

/** The text of top-level `function NAME(…) {…}` (it ends at the first `}` in column 0). */
function topLevelFunction(source, name, file) {
  const start = topLevelFunctionAt(source, name);
  if (start < 0) throw new Error(`${file}: no top-level function ${name} (a newer layout?)`);
  const end = source.indexOf('\n}\n', start);
  if (end < 0) throw new Error(`${file}: cannot find the end of ${name}`);
  return source.slice(start, end + 2).replace(/^export /, '');
}

/** A module's text as a plain script: its `export {…};` lists dropped, `export` before declarations removed. */
function withoutExports(source) {
  return source.replace(/^export\s*\{[^}]*\};?[ \t]*$/gm, '').replace(/^export (default )?(?=(async )?function|const|let|var|class)/gm, '');
}

/** Where process_alloc_data lives when MemoryViz.js only imports it. */
function processAllocDataFile(memoryVizPath) {
  const path = process.env.MEMSCOPE_PROCESS_ALLOC_DATA_JS || join(dirname(memoryVizPath), 'process_alloc_data.js');
  if (!existsSync(path)) {
    throw new Error(
      `${memoryVizPath} imports process_alloc_data from ./process_alloc_data.js (newer PyTorch): ` +
        `fetch torch/utils/viz/process_alloc_data.js from the same PyTorch checkout into ${dirname(memoryVizPath)}, or set MEMSCOPE_PROCESS_ALLOC_DATA_JS`,
    );
  }
  return path;
}

export function loadMemoryViz(path) {
  const source = readFileSync(path, 'utf8');
  const parts = FROM_MEMORYVIZ.map((n) => topLevelFunction(source, n, path));
  for (const n of FROM_MEMORYVIZ_IF_PRESENT) if (topLevelFunctionAt(source, n) >= 0) parts.push(topLevelFunction(source, n, path));
  if (topLevelFunctionAt(source, 'process_alloc_data') >= 0) parts.push(topLevelFunction(source, 'process_alloc_data', path));
  else {
    const helperPath = processAllocDataFile(path);
    const helpers = withoutExports(readFileSync(helperPath, 'utf8'));
    if (topLevelFunctionAt(helpers, 'process_alloc_data') < 0) throw new Error(`${helperPath}: no top-level function process_alloc_data`);
    parts.unshift(helpers);
  }
  return new Function(`${parts.join('\n')}\nreturn { unpickle, annotate_snapshot, process_alloc_data };`)();
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
