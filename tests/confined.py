"""A guard rail for tests that hand evaltui a system folder: the child may write only under one folder.

The work-dir tests run `evaltui --work-dir /etc` (and `/`, `/usr/…`) to prove it is refused
before anything is written. Should that refusal ever regress, the test must fail without having
written into the machine's folders: the child runs under Linux Landlock (kernel ≥ 5.13), which
lets it create, change or delete files only beneath the folder given (and write /dev/null).
Where the kernel has no Landlock, `available()` is False and such a test is skipped.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_WRITE_FILE = 1 << 1
_WRITES = 0x1FF2 | (1 << 13) | (1 << 14)  # write, remove, make-*, refer (ABI 2), truncate (ABI 3)


class _Beneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall() -> Callable[..., int]:
    call = ctypes.CDLL(None, use_errno=True).syscall
    call.restype = ctypes.c_long
    return call  # type: ignore[no-any-return]


def abi() -> int:
    """The kernel's Landlock ABI version (0: none)."""
    try:
        version = _syscall()(ctypes.c_long(_CREATE_RULESET), None, ctypes.c_long(0), ctypes.c_long(1))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def available() -> bool:
    return abi() >= 3


def writes_only_under(folder: str) -> Callable[[], None]:
    """A `preexec_fn` confining the child's writes beneath `folder` (raises in the child when it cannot)."""

    def confine() -> None:
        call = _syscall()
        L = ctypes.c_long
        attr = ctypes.c_uint64(_WRITES)
        ruleset = call(L(_CREATE_RULESET), ctypes.byref(attr), L(8), L(0))
        if ruleset < 0:
            raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
        for path, allowed in ((folder, _WRITES), (os.devnull, _WRITE_FILE | (1 << 14))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            if call(L(_ADD_RULE), L(ruleset), L(1), ctypes.byref(_Beneath(allowed, fd)), L(0)) != 0:
                raise OSError(ctypes.get_errno(), "landlock_add_rule")
            os.close(fd)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(38, 1, 0, 0, 0) != 0 or call(L(_RESTRICT_SELF), L(ruleset), L(0)) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
        os.close(ruleset)

    return confine
