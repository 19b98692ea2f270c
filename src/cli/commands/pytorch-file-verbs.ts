import type { PytorchFileVerb, VerbModule } from '../verbs.js';

/**
 * The verbs that read PyTorch files, each loaded only when asked for. The `memscope` bin runs them
 * from one bundle of the CLI (scripts/build-cli.mjs) that holds these verbs and no other;
 * commands/index.ts adds the rest for the CLI from tsc's output.
 */
export const PYTORCH_FILE_VERB_MODULES: Readonly<Record<PytorchFileVerb, VerbModule>> = {
  summary: () => import('./summary.js'),
  stats: () => import('./stats.js'),
  trace: () => import('./trace.js'),
  segments: () => import('./segments.js'),
  memory: () => import('./memory.js'),
  compare: () => import('./compare.js'),
  plot: () => import('./plot.js'),
};
