import { parseStack } from '../allocator/stacks.js';
import type { Frame } from '../torch/pytorch-vocabulary.js';

interface V8ErrorConstructor {
  captureStackTrace?(target: object, above?: Function): void;
  stackTraceLimit?: number;
}

/** memscope's own files, unbundled: an attribution wrapper's frames are not the page's. */
const OWN_FILE = /[\\/](src|dist)[\\/]webgpu[\\/]/;

/**
 * Parsed stacks by their text: a program creates most of its resources from a few call sites, so
 * one parse (and one frame array shared by their records) serves all of them.
 */
const parsed = new Map<string, Frame[]>();
const MAX_PARSED = 4096;

function parseOnce(stack: string | undefined): Frame[] {
  if (!stack) return [];
  let frames = parsed.get(stack);
  if (!frames) {
    frames = parseStack(stack).filter((f) => !OWN_FILE.test(f.filename));
    if (parsed.size >= MAX_PARSED) parsed.clear();
    parsed.set(stack, frames);
  }
  return frames;
}

/**
 * The page's JavaScript stack at a WebGPU call, innermost first, without memscope's own frames:
 * V8's `Error.captureStackTrace` starts the stack below `above` (the patched method); elsewhere
 * `new Error().stack` is cut after the first frame that names `above`. Frames in memscope/webgpu's
 * own files (`withAttribution`) are dropped when their file names show them.
 */
export function pageStack(above: Function, limit: number): Frame[] {
  const E = Error as unknown as V8ErrorConstructor;
  if (typeof E.captureStackTrace === 'function') {
    const holder: { stack?: string } = {};
    const saved = E.stackTraceLimit;
    E.stackTraceLimit = limit;
    try {
      E.captureStackTrace(holder, above);
    } finally {
      E.stackTraceLimit = saved;
    }
    return parseOnce(holder.stack);
  }
  const frames = parseStack(new Error().stack);
  const at = frames.findIndex((f) => f.name === above.name || f.name.endsWith(`.${above.name}`));
  return frames.slice(at + 1, at + 1 + limit).filter((f) => !OWN_FILE.test(f.filename));
}
