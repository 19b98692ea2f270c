/**
 * The entry of the CLI bundle (dist/cli/memscope-cli.cjs, scripts/build-cli.mjs): the CLI with the
 * verbs that read PyTorch files and no other, so `memscope summary FILE` loads one file instead
 * of ~35 ES modules (src/cli/bin.ts says when the bin runs it).
 */
import { runCli } from './cli.js';
import { PYTORCH_FILE_VERB_MODULES } from './commands/pytorch-file-verbs.js';

/** Runs a PyTorch-file verb (argv[2]) on `argv` (process.argv's shape) and sets `process.exitCode`. */
export function runPytorchFileVerb(argv: readonly string[]): Promise<void> {
  return runCli(argv, PYTORCH_FILE_VERB_MODULES);
}
