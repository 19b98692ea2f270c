import type { Frame } from '../torch/pytorch-vocabulary.js';

/**
 * JavaScript call stacks as PyTorch-style frames ({filename, line, name}),
 * innermost first like PyTorch's. Frames inside memscope's allocator module
 * are dropped so the first frame is the program's.
 */

// V8: "    at name (file:line:col)" or "    at file:line:col"; Firefox/Safari: "name@file:line:col".
const V8_FRAME = /^\s*at (?:(.*?) \()?(.*?):(\d+):\d+\)?$/;
const GECKO_FRAME = /^(.*?)@(.*?):(\d+):\d+$/;

export function parseStack(stack: string | undefined): Frame[] {
  if (!stack) return [];
  const frames: Frame[] = [];
  for (const line of stack.split('\n')) {
    const m = V8_FRAME.exec(line) ?? GECKO_FRAME.exec(line);
    if (!m) continue;
    frames.push({ filename: m[2], line: Number(m[3]), name: m[1] || '<anonymous>' });
  }
  return frames;
}

const OWN_FILE = /[\\/](src|dist)[\\/]allocator[\\/]/;

/** The caller's stack at this point, without memscope's allocator frames. */
export function captureJsStack(limit = 64): Frame[] {
  const saved = Error.stackTraceLimit;
  Error.stackTraceLimit = limit + 16;
  const stack = new Error().stack;
  Error.stackTraceLimit = saved;
  const frames = parseStack(stack);
  let first = 0;
  while (first < frames.length && OWN_FILE.test(frames[first].filename)) first++;
  return frames.slice(first, first + limit);
}
