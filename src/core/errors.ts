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

/**
 * Whether `err` is memscope's verdict on its input (else a bug or a system error). One class per
 * process: the `memscope` bin runs each command from one copy of memscope's modules (src/cli/bin.ts).
 */
export function isMemscopeError(err: unknown): err is MemscopeError {
  return err instanceof MemscopeError;
}
