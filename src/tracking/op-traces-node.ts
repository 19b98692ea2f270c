/**
 * File I/O for operator traces: save/load stats, write the plots. Node only.
 *
 * Node's `fs` is reached through `process.getBuiltinModule` (Node ≥ 20.16)
 * rather than an `import`, so modules that offer `saveStats(path)` and
 * friends stay importable in a browser bundle; there, calling them is a clear
 * MemscopeError pointing at the string-based methods instead.
 */
import type * as NodeFs from 'node:fs';
import type * as NodePath from 'node:path';
import { MemscopeError } from '../core/errors.js';
import { opTraceStatsToJson, parseOpTraceStats, renderOpTraceCharts, renderOpTracesHtml, type OpTraceStats } from './op-traces.js';

interface NodeModules {
  fs: typeof NodeFs;
  path: typeof NodePath;
}

function nodeModules(what: string): NodeModules {
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  if (typeof proc?.getBuiltinModule !== 'function') {
    throw new MemscopeError(
      'no-file-system',
      `${what} uses the file system and needs Node.js ≥ 20.16; in a browser use statsJson()/loadJson() and renderTraces() instead`,
    );
  }
  return { fs: proc.getBuiltinModule('node:fs') as typeof NodeFs, path: proc.getBuiltinModule('node:path') as typeof NodePath };
}

function ioError(err: unknown, action: string, file: string): MemscopeError {
  const code = (err as { code?: string }).code;
  const reason = code === 'ENOENT' ? 'no such file or directory' : err instanceof Error ? err.message : String(err);
  return new MemscopeError('io-error', `cannot ${action} ${file}: ${reason}`, { cause: err });
}

export function saveOpTraceStats(file: string, stats: OpTraceStats): void {
  const { fs } = nodeModules('saveStats(path)');
  try {
    fs.writeFileSync(file, opTraceStatsToJson(stats), 'utf8');
  } catch (err) {
    throw ioError(err, 'write', file);
  }
}

export function loadOpTraceStats(file: string): OpTraceStats {
  const { fs } = nodeModules('load(path)');
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw ioError(err, 'read', file);
  }
  return parseOpTraceStats(text, file);
}

export interface WrittenTraces {
  /** The HTML page holding every chart. */
  readonly html: string;
  /** The SVG files, combined chart first. */
  readonly svgs: readonly string[];
}

/** Writes the four SVG charts and `memory_traces.html` into `dir` (created if missing). */
export function writeOpTracePlots(dir: string, stats: OpTraceStats, top = 20): WrittenTraces {
  const { fs, path } = nodeModules('showTraces(path)');
  const charts = renderOpTraceCharts(stats);
  const svgs: string[] = [];
  let target = dir;
  try {
    fs.mkdirSync(dir, { recursive: true });
    for (const chart of charts) {
      target = path.join(dir, chart.file);
      fs.writeFileSync(target, `<?xml version="1.0" encoding="UTF-8"?>\n${chart.svg}\n`, 'utf8');
      svgs.push(target);
    }
    target = path.join(dir, 'memory_traces.html');
    fs.writeFileSync(target, renderOpTracesHtml(stats, charts, top), 'utf8');
  } catch (err) {
    throw ioError(err, 'write', target);
  }
  return { html: target, svgs };
}
