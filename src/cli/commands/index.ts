import type { VerbModule } from '../verbs.js';
import { PYTORCH_FILE_VERB_MODULES } from './pytorch-file-verbs.js';

/** Every verb, by name, in the order `memscope --help` lists them (one line each). */
export const VERB_MODULES: Readonly<Record<string, VerbModule>> = {
  demo: () => import('./demo.js'),
  ops: () => import('./ops.js'),
  run: () => import('./run.js'),
  leaks: () => import('./leaks.js'),
  report: () => import('./report.js'),
  query: () => import('./query.js'),
  view: () => import('./view.js'),
  viewer: () => import('./viewer.js'),
  replay: () => import('./replay.js'),
  ...PYTORCH_FILE_VERB_MODULES,
};
