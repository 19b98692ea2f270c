// Types for scripts/check-architecture.mjs (imported by test/architecture/).
export type Rule = 'resolve' | 'layer' | 'render' | 'cycle' | 'length';
export interface Violation {
  readonly rule: Rule;
  readonly files: string[];
  readonly message: string;
}
export interface ImportEdge {
  readonly from: string;
  readonly to: string;
  readonly typeOnly: boolean;
  readonly line: number;
}
export interface Rules {
  readonly layers: readonly (readonly string[])[];
  readonly entryPoints: readonly string[];
  readonly maxLines: number;
  readonly longFileExceptions: Readonly<Record<string, string>>;
  readonly maxPortFunctionLines: number;
}
export const LAYERS: readonly (readonly string[])[];
export const ENTRY_POINTS: readonly string[];
export const MAX_LINES: number;
export const LONG_FILE_EXCEPTIONS: Readonly<Record<string, string>>;
export const MAX_PORT_FUNCTION_LINES: number;
export const DEFAULT_RULES: Rules;
export function importsOf(fileName: string, text: string): { specifier: string; typeOnly: boolean; line: number }[];
export function longestFunction(fileName: string, text: string): { name: string; line: number; lines: number } | null;
export function checkArchitecture(srcDir: string, rules?: Rules): { files: string[]; edges: ImportEdge[]; violations: Violation[] };
export function folderGraph(edges: readonly ImportEdge[], rules?: Rules): { from: string; to: string; imports: number }[];
export function formatViolations(violations: readonly Violation[]): string;
