import type { Phase, TensorRef } from './events.js';

/**
 * What a storage is used for, and the rules that decide it: one categoriser, used by MemTracker's
 * recorder (src/tracking/mem-recorder.ts) and the capture recorder (src/capture/recorder.ts).
 * The categories and the rules are PyTorch MemTracker's (`_MemRefType` and
 * `_update_and_maybe_create_winfos` in torch/distributed/_tools/mem_tracker.py); their TFJS
 * meaning is in docs/MEMTRACKER.md, "Categories".
 *
 * A storage gets a category when it is made (from the phase), and another when the program's
 * structure says what it is: a tracked module's weight (Parameter, Buffer), an optimizer's state
 * (Optstate), a variable's gradient (Gradient), a tensor the user tracks (Other). A variable keeps
 * its category when `assign` gives it a new storage.
 */

/** The category names, PyTorch's, in PyTorch's enum order (the order of CategoryIndex). */
export const MEM_REF_TYPES = ['Parameter', 'Buffer', 'Gradient', 'Activation', 'Temp', 'Optstate', 'Other'] as const;
export type MemRefType = (typeof MEM_REF_TYPES)[number];

/** Indices into MEM_REF_TYPES, for recorders that count by category in arrays. */
export const Category = { PARAM: 0, BUFFER: 1, GRAD: 2, ACT: 3, TEMP: 4, OPT: 5, OTHER: 6 } as const;
export type CategoryIndex = (typeof Category)[keyof typeof Category];

/** A storage made now: Optstate in an optimizer step, Temp in backward, Activation otherwise (forward or no phase). */
export function categoryOfAllocation(phase: Phase): CategoryIndex {
  return phase === 'optimizer' ? Category.OPT : phase === 'backward' ? Category.TEMP : Category.ACT;
}

/**
 * The category of a gradient a gradient computation returned for `x`: Gradient when `x` is a
 * variable (PyTorch's `.grad` of a parameter); null for any other tensor's, which keeps the
 * category it was made with (Temp).
 */
export function categoryOfGradient(x: TensorRef): CategoryIndex | null {
  return x.variableName !== undefined ? Category.GRAD : null;
}

/**
 * The category of a variable's new storage after `assign`: the variable keeps its role (a weight
 * stays Parameter or Buffer, a moment Optstate), known from the variable itself (`remembered`,
 * where the recorder classified it) or else from its previous storage's category. Undefined when
 * neither is known: the new storage keeps the category it was made with.
 */
export function categoryAfterAssign(remembered: CategoryIndex | undefined, previous: CategoryIndex | undefined): CategoryIndex | undefined {
  return remembered ?? previous;
}

/** Whether a storage in `category` belongs to a tracked model, optimizer or user tensor (it is never a leak). */
export function isOwnedCategory(category: CategoryIndex): boolean {
  return category === Category.PARAM || category === Category.BUFFER || category === Category.OPT || category === Category.OTHER;
}

/**
 * The category of a variable's previous storage when it outlives an `assign` (other tensors still
 * hold it: TFJS leaks the tape's saved clones of the weights when a layer throws inside `fit`). It
 * is no longer the variable's, as PyTorch updates parameters in place: an owned storage becomes
 * what forward saved for backward, Activation; null when its category stays.
 */
export function categoryOfReplacedStorage(category: CategoryIndex): CategoryIndex | null {
  return isOwnedCategory(category) ? Category.ACT : null;
}
