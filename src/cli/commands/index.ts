import type { Command } from 'commander';

/** Each CLI verb lives in its own module and registers itself here (one line each). */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [
];
