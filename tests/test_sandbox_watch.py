"""Where the sandbox's memory cgroup goes (read from /proc/self/cgroup and mountinfo), and how its
folder is measured. The kernel's side is in tests/test_code_exec_sandbox.py; here the files it
reads are written by the test, for the layouts this machine does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaltui.scoring.code.sandbox_watch import _BLOCK, folder_bytes, memory_hierarchy


def _proc(tmp_path: Path, cgroup: str, mountinfo: str) -> str:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text(mountinfo.replace("{root}", str(tmp_path)))
    return str(proc)


def test_cgroup_v2_is_used_when_the_memory_controller_is_delegated(tmp_path: Path) -> None:
    own = tmp_path / "cg2" / "user.slice" / "evaltui"
    own.mkdir(parents=True)
    (own / "cgroup.subtree_control").write_text("cpu memory pids\n")
    proc = _proc(tmp_path, "0::/user.slice/evaltui\n", "41 31 0:38 / {root}/cg2 rw,relatime - cgroup2 cgroup2 rw\n")
    assert memory_hierarchy(proc) == (own, 2)


def test_v1_memory_is_used_when_v2_has_no_memory_controller_to_give(tmp_path: Path) -> None:
    """This machine's hybrid layout: v2 mounted without controllers, v1 memory beside it."""
    (tmp_path / "cg2" / "x").mkdir(parents=True)
    (tmp_path / "cg2" / "x" / "cgroup.subtree_control").write_text("\n")
    own = tmp_path / "memory" / "process_api" / "abc"
    own.mkdir(parents=True)
    proc = _proc(
        tmp_path,
        "4:memory:/process_api/abc\n1:cpu:/\n0::/x\n",
        "35 31 0:32 / {root}/memory rw,relatime - cgroup cgroup rw,memory\n41 31 0:38 / {root}/cg2 rw,relatime - cgroup2 cgroup2 rw\n",
    )
    assert memory_hierarchy(proc) == (own, 1)


@pytest.mark.parametrize(
    ("mount_root", "own_path", "expected"),
    [("/docker/abc", "/docker/abc/job", "memory/job"), ("/docker/abc", "/elsewhere", None)],
)
def test_a_containers_view_of_the_hierarchy_is_followed(tmp_path: Path, mount_root: str, own_path: str, expected: str | None) -> None:
    """A container sees its part of the tree mounted at the top: the path is taken relative to the
    mount's root, and a cgroup outside what is mounted is not guessed at."""
    (tmp_path / "memory" / "job").mkdir(parents=True)
    proc = _proc(tmp_path, f"4:memory:{own_path}\n", f"35 31 0:32 {mount_root} {{root}}/memory rw - cgroup cgroup rw,memory\n")
    assert memory_hierarchy(proc) == (None if expected is None else (tmp_path / expected, 1))


def test_no_hierarchy_no_cgroup(tmp_path: Path) -> None:
    assert memory_hierarchy(_proc(tmp_path, "0::/\n", "22 1 0:21 / /proc rw - proc proc rw\n")) is None


def test_a_folder_is_measured_by_what_it_holds_each_entry_at_least_a_block(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * (3 * 2**20))
    (tmp_path / "sub").mkdir()
    for n in range(10):
        (tmp_path / "sub" / f"empty{n}").touch()
    measured = folder_bytes(str(tmp_path), 1 << 40)
    assert 3 * 2**20 + 11 * _BLOCK <= measured <= 3 * 2**20 + 20 * _BLOCK
    assert folder_bytes(str(tmp_path), 2**20) > 2**20  # stops once past what it was asked about


def test_a_cgroup_is_made_limited_and_removed_and_a_dead_evaltuis_are_swept(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """On a fake v1 tree (plain folders): the files written, the folder removed after; the empty
    cgroups of an evaltui that was killed (a pid no process has) removed, a live one's kept."""
    import os

    from evaltui.scoring.code.sandbox_watch import MemoryCgroup

    own = tmp_path / "memory" / "job"
    for name in ("evaltui-999999999-0", f"evaltui-{os.getpid()}-99", "evaltui-1-0", "someone-else"):
        (own / name).mkdir(parents=True)
    proc = _proc(tmp_path, "4:memory:/job\n", "35 31 0:32 / {root}/memory rw - cgroup cgroup rw,memory\n")
    monkeypatch.setattr(MemoryCgroup, "_unavailable", False)
    monkeypatch.setattr(MemoryCgroup, "_swept", False)
    group = MemoryCgroup.make(512 * 2**20, proc)
    assert group is not None and group.path.parent == own
    assert (group.path / "memory.limit_in_bytes").read_text() == str(512 * 2**20)
    (group.path / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert group.oom_killed()
    for name in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control"):
        (group.path / name).unlink(missing_ok=True)  # (a real cgroup's files go with it)
    group.close()
    assert sorted(p.name for p in own.iterdir()) == sorted([f"evaltui-{os.getpid()}-99", "evaltui-1-0", "someone-else"])
