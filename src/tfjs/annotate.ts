import { afterSettled } from '../core/settle.js';
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
  return afterSettled(
    fn,
    (value) => {
      inst.annotationEnd(name);
      return value;
    },
    () => inst.annotationEnd(name),
  ) as T;
}
