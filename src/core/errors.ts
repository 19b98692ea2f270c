/**
 * Marks memscope's errors across copies of this module. The `memscope` bin runs the PyTorch-file
 * verbs from one bundle and the other verbs from dist/ (src/cli/bin.ts), so two MemscopeError
 * classes exist in that process; `isMemscopeError` recognises both. A registered symbol, because
 * a string property could be faked by any object and a class identity cannot cross the copies.
 */
const MEMSCOPE_ERROR = Symbol.for('memscope.error');

/**
 * The one error type memscope throws for bad input or misuse. `code` is stable
 * for programs; `message` names what was wrong and where (offset, key, path).
 */
export class MemscopeError extends Error {
  override readonly name = 'MemscopeError';
  readonly [MEMSCOPE_ERROR] = true;
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Whether `err` is a MemscopeError from any copy of memscope's modules loaded in this process. */
export function isMemscopeError(err: unknown): err is MemscopeError {
  return typeof err === 'object' && err !== null && (err as { [MEMSCOPE_ERROR]?: unknown })[MEMSCOPE_ERROR] === true;
}
