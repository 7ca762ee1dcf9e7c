"""onlinegp.io: atomic writes, metric CSVs and run directories."""

import csv
import stat
import subprocess
import sys

import pytest
import torch

from onlinegp.io import atomic_write, claim_run_directory, run_kind, write_csv


def test_atomic_write_takes_text_bytes_or_a_writer(tmp_path):
    path = tmp_path / "out.txt"
    assert atomic_write(path, "μ = 1\n") == path and path.read_text(encoding="utf-8") == "μ = 1\n"
    atomic_write(path, b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"
    atomic_write(tmp_path / "state.pt", lambda fh: torch.save({"x": torch.arange(3)}, fh))
    assert torch.equal(torch.load(tmp_path / "state.pt")["x"], torch.arange(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "state.pt"]  # no temporary file left
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")

    def fail_halfway(fh):
        fh.write(b"half of the new")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(path, fail_halfway)
    with pytest.raises(TypeError):
        atomic_write(path, 42)
    assert path.read_text() == "old" and list(tmp_path.iterdir()) == [path]


def dict_writer_bytes(path, rows, columns):
    """What ``csv.DictWriter`` on a file opened with ``newline=""`` writes (the format of earlier outputs)."""
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path.read_bytes()


def test_write_csv_uses_every_key_in_first_seen_order(tmp_path):
    rows = [{"batch": 1, "rmse": 0.5}, {"batch": 2, "rmse": 0.25, "jitter": 1e-8}, {"batch": 3, "note": "a,b"}]
    write_csv(tmp_path / "m.csv", rows)
    assert (tmp_path / "m.csv").read_bytes() == dict_writer_bytes(
        tmp_path / "ref.csv", rows, ["batch", "rmse", "jitter", "note"]
    )
    assert (tmp_path / "m.csv").read_bytes().startswith(b"batch,rmse,jitter,note\r\n1,0.5,,\r\n")
    with open(tmp_path / "m.csv", newline="") as fh:
        assert list(csv.DictReader(fh))[2] == {"batch": "3", "rmse": "", "jitter": "", "note": "a,b"}


def test_write_csv_with_columns_leaves_other_keys_out(tmp_path):
    rows = [{"method": "VIPS", "rmse": 0.1, "extra": 1}]
    write_csv(tmp_path / "t.csv", rows, ["method", "rmse"])
    assert (tmp_path / "t.csv").read_bytes() == b"method,rmse\r\nVIPS,0.1\r\n"
    write_csv(tmp_path / "t.csv", [], ["method", "rmse"])
    assert (tmp_path / "t.csv").read_bytes() == b"method,rmse\r\n"


def test_a_run_directory_is_locked_while_its_run_lives(tmp_path):
    """Issue 35, item 5: two runs started together into one --out both ran and one's results were lost."""
    out = tmp_path / "run"
    code = (
        "import sys; from onlinegp.io import claim_run_directory; "
        "claim_run_directory(sys.argv[1], 'mission'); print('held', flush=True); sys.stdin.read()"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        for force, reuse in ((False, True), (True, False)):  # not even --resume or --force takes it over
            with pytest.raises(ValueError, match=f"in use by another run \\(process {holder.pid}\\)"):
                claim_run_directory(out, "mission", force=force, reuse=reuse)
        assert run_kind(out) == "mission"
    finally:
        holder.communicate("")
    assert claim_run_directory(out, "mission", reuse=True) == out  # free once that run has ended
    assert claim_run_directory(out, "mission", reuse=True) == out  # and this process may claim it again
    assert run_kind(out) == "mission"


def test_a_claim_refused_for_another_runs_files_makes_no_lock_file(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="holds other files: pass --force"):
        claim_run_directory(tmp_path, "stream")
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_force_empties_a_run_directory_and_a_claim_removes_temporary_files_of_a_killed_run(tmp_path):
    out = tmp_path / "run"
    claim_run_directory(out, "mission")
    (out / "figures").mkdir()
    (out / "model.pt").write_bytes(b"old")
    (out / ".survey.npz.k2j4_x1.tmp").write_bytes(b"")  # what atomic_write leaves when its process is killed
    claim_run_directory(out, "mission", reuse=True)
    assert sorted(p.name for p in out.iterdir()) == [".onlinegp-lock", ".onlinegp-run", "figures", "model.pt"]
    claim_run_directory(out, "stream", force=True)
    assert sorted(p.name for p in out.iterdir()) == [".onlinegp-lock", ".onlinegp-run"]
    assert run_kind(out) == "stream"
