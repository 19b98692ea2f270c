/**
 * The one error type memscope throws for bad input or misuse. `code` is stable
 * for programs; `message` names what was wrong and where (offset, key, path).
 */
export class MemscopeError extends Error {
  override readonly name = 'MemscopeError';
  constructor(
    readonly code: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
