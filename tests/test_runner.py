import time

import pytest

from poolbench.errors import ToolMissingError
from poolbench.system.runner import CommandError, CommandResult, LocalRunner, RecordingRunner


def test_runs_argv_and_logs_duration_and_exit_code() -> None:
    r = LocalRunner()
    res = r.run(["echo", "a b", "$HOME;rm"])
    # No shell: the arguments arrive verbatim.
    assert res.stdout == "a b $HOME;rm\n"
    assert res.returncode == 0
    assert r.calls[-1].argv == ("echo", "a b", "$HOME;rm")
    assert r.calls[-1].returncode == 0
    assert r.calls[-1].duration_s >= 0


def test_shell_string_is_refused() -> None:
    with pytest.raises(TypeError, match="argument list"):
        LocalRunner().run("echo hi")  # type: ignore[arg-type]


def test_command_error_shows_argv_exit_code_and_stderr_tail() -> None:
    r = LocalRunner()
    script = "for i in $(seq 1 40); do echo line$i >&2; done; exit 3"
    with pytest.raises(CommandError) as info:
        r.run(["bash", "-c", script])
    text = str(info.value)
    assert "exit code 3" in text
    assert "bash -c" in text
    assert "line40" in text and "line39" in text
    assert "line1\n" not in text  # only the tail
    assert r.calls[-1].returncode == 3


def test_check_false_returns_failure() -> None:
    res = LocalRunner().run(["false"], check=False)
    assert res.returncode == 1


def test_missing_program_names_the_package() -> None:
    with pytest.raises(ToolMissingError) as info:
        LocalRunner().run(["fio-does-not-exist-xyz"])
    assert "not installed" in str(info.value)


def test_missing_fio_hint_names_debian_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolMissingError) as info:
        LocalRunner().run(["fio", "--version"])
    assert "Debian package: fio" in str(info.value)


def test_dry_run_records_mutations_but_runs_probes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    echoed: list[str] = []
    r = LocalRunner(dry_run=True, echo=echoed.append)
    target = tmp_path / "made"
    res = r.run(["touch", str(target)])
    assert res.dry_run and not target.exists()
    assert echoed == [f"touch {target}"]
    probe = r.run(["echo", "probe"], mutates=False)
    assert probe.stdout == "probe\n" and not probe.dry_run
    assert [c.dry_run for c in r.calls] == [True, False]


def test_timeout_kills_the_child() -> None:
    r = LocalRunner()
    t0 = time.monotonic()
    with pytest.raises(Exception):  # noqa: B017 - subprocess.TimeoutExpired
        r.run(["sleep", "30"], timeout=0.5)
    assert time.monotonic() - t0 < 15
    assert r.calls[-1].returncode is None  # logged as interrupted


def test_recording_runner_scripts_answers() -> None:
    r = RecordingRunner(
        responses={
            "zpool": "tank\n",
            ("mkfs.ext4", "/dev/x"): CommandResult(("mkfs.ext4", "/dev/x"), 1, "", "busy", 0.0),
        }
    )
    assert r.run(["zpool", "list"]).stdout == "tank\n"
    with pytest.raises(CommandError, match="busy"):
        r.run(["mkfs.ext4", "/dev/x"])
    assert r.argvs == [("zpool", "list"), ("mkfs.ext4", "/dev/x")]
