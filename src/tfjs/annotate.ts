import { activeInstallation } from './adapter.js';

/**
 * Marks a user region, like PyTorch's `record_function`: sinks see
 * `onScopeStart(name, 'annotation')` before `fn` runs and
 * `onScopeEnd(name, 'annotation')` after it returns, throws, or (for an async
 * `fn`) settles. Without an attached memscope session it just calls `fn`.
 * Whatever `fn` returns or throws reaches the caller unchanged.
 */
export function annotate<T>(name: string, fn: () => T): T {
  const inst = activeInstallation();
  if (inst === null) return fn();
  inst.annotationStart(name);
  let result: T;
  try {
    result = fn();
  } catch (err) {
    inst.annotationEnd(name);
    throw err;
  }
  if (result != null && typeof (result as { then?: unknown }).then === 'function') {
    const end = () => inst.annotationEnd(name);
    return (result as unknown as Promise<unknown>).then(
      (v) => {
        end();
        return v;
      },
      (err: unknown) => {
        end();
        throw err;
      },
    ) as T;
  }
  inst.annotationEnd(name);
  return result;
}
