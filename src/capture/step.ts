/**
 * `step()`: a program's own step boundary for `memscope run`. Training steps
 * end at each optimizer update and inference steps at each top-level
 * `predict`/`execute`/`executeAsync`; a program whose unit of work is neither
 * (a data pipeline, a generation loop calling many models) marks its own.
 *
 * The listeners live on a registered global symbol, so the `step` a program
 * imports and the capture preload `memscope run` loads reach each other even
 * when they are two copies of memscope (the program's installed one and the
 * CLI's). Without a listener, `step()` does nothing.
 */
const LISTENERS = Symbol.for('memscope.step.listeners');

type StepListener = (label: string | undefined) => void;

function listeners(): StepListener[] {
  const g = globalThis as { [LISTENERS]?: StepListener[] };
  return (g[LISTENERS] ??= []);
}

/** Marks the end of one step of the program's work (see docs/REPORT.md, "Steps"). */
export function step(label?: string): void {
  for (const listener of listeners()) {
    try {
      listener(label);
    } catch {
      // A capture's failure must not reach the program.
    }
  }
}

/** Adds a listener for `step()` calls; returns the function that removes it. */
export function onStep(listener: StepListener): () => void {
  const list = listeners();
  list.push(listener);
  return () => {
    const i = list.indexOf(listener);
    if (i >= 0) list.splice(i, 1);
  };
}
