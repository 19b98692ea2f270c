import { describe, expect, it } from 'vitest';
import type { StorageRef, TensorRef } from '../../src/core/events.js';
import {
  Category,
  MEM_REF_TYPES,
  categoryAfterAssign,
  categoryOfAllocation,
  categoryOfGradient,
  categoryOfReplacedStorage,
  isOwnedCategory,
} from '../../src/core/mem-categories.js';

const storage: StorageRef = { id: 1, device: 'cpu', bytes: 4, dtype: 'float32', shape: [1] };
const tensor: TensorRef = { id: 1, storage, dtype: 'float32', shape: [1] };
const variable: TensorRef = { ...tensor, variableName: 'dense/kernel', trainable: true };

describe('the categoriser MemTracker and the capture recorder share', () => {
  it('names the categories in PyTorch order, the order of the indices', () => {
    expect(MEM_REF_TYPES[Category.PARAM]).toBe('Parameter');
    expect(MEM_REF_TYPES[Category.BUFFER]).toBe('Buffer');
    expect(MEM_REF_TYPES[Category.GRAD]).toBe('Gradient');
    expect(MEM_REF_TYPES[Category.ACT]).toBe('Activation');
    expect(MEM_REF_TYPES[Category.TEMP]).toBe('Temp');
    expect(MEM_REF_TYPES[Category.OPT]).toBe('Optstate');
    expect(MEM_REF_TYPES[Category.OTHER]).toBe('Other');
  });

  it('categorises a new storage by phase', () => {
    expect(['forward', 'backward', 'optimizer', 'none'].map((p) => MEM_REF_TYPES[categoryOfAllocation(p as 'forward')])).toEqual([
      'Activation',
      'Temp',
      'Optstate',
      'Activation',
    ]);
  });

  it('makes a gradient Gradient only when taken with respect to a variable', () => {
    expect(categoryOfGradient(variable)).toBe(Category.GRAD);
    expect(categoryOfGradient(tensor)).toBeNull();
  });

  it('keeps a variable\'s category across assign: what the variable was given, else its previous storage\'s', () => {
    expect(categoryAfterAssign(Category.OPT, Category.ACT)).toBe(Category.OPT);
    expect(categoryAfterAssign(undefined, Category.PARAM)).toBe(Category.PARAM);
    expect(categoryAfterAssign(undefined, undefined)).toBeUndefined();
  });

  it('turns an owned storage that outlives its variable\'s assign into Activation, and leaves the others', () => {
    const owned = [Category.PARAM, Category.BUFFER, Category.OPT, Category.OTHER];
    for (const c of owned) {
      expect(isOwnedCategory(c)).toBe(true);
      expect(categoryOfReplacedStorage(c)).toBe(Category.ACT);
    }
    for (const c of [Category.GRAD, Category.ACT, Category.TEMP]) {
      expect(isOwnedCategory(c)).toBe(false);
      expect(categoryOfReplacedStorage(c)).toBeNull();
    }
  });
});
