/**
 * The verbs that read PyTorch files. They are bundled with the CLI's entry (scripts/build-cli.mjs)
 * and load alone (src/cli/cli.ts); the bin keeps one compile cache per verb (src/cli/bin.ts).
 * Everything else loads the full registry from dist/.
 */
export const PYTORCH_FILE_VERBS = ['summary', 'stats', 'trace', 'segments', 'memory', 'compare', 'plot'] as const;
export type PytorchFileVerb = (typeof PYTORCH_FILE_VERBS)[number];
