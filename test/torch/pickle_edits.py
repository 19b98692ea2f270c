# Helpers for the scripts that write test pickles with CPython and then edit their bytes
# (make-frame-list-pickles.py, make-segment-pickles.py).
import pickletools


def ops(p):
    """(opcode name, argument, byte offset, memo entries made before it) for every opcode of p."""
    memo = 0
    for op, arg, pos in pickletools.genops(p):
        yield op.name, arg, pos, memo
        if op.name == 'MEMOIZE':
            memo += 1


def strip_frames(p):
    """p without its FRAME opcodes (9 bytes each), so that bytes can be inserted anywhere."""
    out = bytearray()
    last = 0
    for name, arg, pos, memo in ops(p):
        if name == 'FRAME':
            out += p[last:pos]
            last = pos + 9
    out += p[last:]
    return bytes(out)
