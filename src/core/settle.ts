/**
 * Runs `fn`, which may return a value or a promise, then `onValue` with its
 * value or `onError` if it threw or rejected (after which the same error is
 * rethrown, untouched). Sync in, sync out: a plain function never becomes
 * async. Every `track(fn)`-style API in memscope uses this so it stops, detaches
 * and restores exactly once, whether the user's code is sync or async and
 * whether it succeeds or throws.
 */
export function afterSettled<T, R>(fn: () => T, onValue: (value: Awaited<T>) => R, onError: () => void): T extends PromiseLike<unknown> ? Promise<R> : R;
export function afterSettled<T, R>(fn: () => T, onValue: (value: Awaited<T>) => R, onError: () => void): R | Promise<R> {
  let result: T;
  try {
    result = fn();
  } catch (err) {
    onError();
    throw err;
  }
  if (isPromiseLike(result)) {
    return Promise.resolve(result).then(
      (value) => onValue(value as Awaited<T>),
      (err: unknown) => {
        onError();
        throw err;
      },
    );
  }
  return onValue(result as Awaited<T>);
}

export function isPromiseLike(value: unknown): value is PromiseLike<unknown> {
  return value != null && typeof (value as { then?: unknown }).then === 'function';
}
