/**
 * File I/O for trace readers: streams a (possibly gzipped) file (core/file-chunks-node.ts)
 * through a streaming TextDecoder into `ChromeTraceReader`, so a 50 MB
 * trace is never held as one string. `export_memory_timeline` JSON is small
 * (one row per distinct timestamp) and is parsed whole.
 */
import { fileChunks, type FileReadOptions } from '../core/file-chunks-node.js';
import { ChromeTraceReader } from './chrome-trace.js';
import type { MemoryTrace } from './memory-trace.js';
import { readJsonTraceChunks } from './memory-file-stream.js';

/** Streams a Kineto chrome trace (`.json` or `.json.gz`) into the memory-trace model. */
export async function readChromeTraceFile(path: string, options: FileReadOptions = {}): Promise<MemoryTrace> {
  const reader = new ChromeTraceReader({ source: path });
  const decoder = new TextDecoder('utf-8');
  for await (const chunk of fileChunks(path, options)) reader.push(decoder.decode(chunk, { stream: true }));
  reader.push(decoder.decode());
  return reader.finish();
}

/**
 * Reads any JSON memory trace file: a Kineto chrome trace (streamed) or an
 * `export_memory_timeline` / `export_memory_timeline_raw` file (see readJsonTraceChunks).
 */
export async function readJsonTraceFile(path: string, options: FileReadOptions = {}): Promise<MemoryTrace> {
  return readJsonTraceChunks(fileChunks(path, options), path);
}
