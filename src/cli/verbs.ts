import type { Command } from 'commander';

/** Each CLI verb lives in its own module and registers itself with commander. */
export type RegisterCommand = (program: Command) => void;

/** Loads one verb's module: `memscope VERB` sets up that verb's modules only. */
export type VerbModule = () => Promise<{ register: RegisterCommand }>;

/**
 * The verbs that read PyTorch files, by name: the `memscope` bin runs them from the CLI bundle
 * (src/cli/bin.ts), whose registry is commands/pytorch-file-verbs.ts.
 */
export const PYTORCH_FILE_VERBS = ['summary', 'stats', 'trace', 'segments', 'memory', 'compare', 'plot'] as const;
export type PytorchFileVerb = (typeof PYTORCH_FILE_VERBS)[number];
