"""What the multi-rank tests of titan-run look for while a run goes on: each rank's process and
how many steps it has logged."""
import os


def rank_processes(marker, rank):
    """PIDs of this test's titan-run processes of `rank` (their command line holds `marker`)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace")
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if "titan-run" in cmdline and marker in cmdline and \
                f"OMPI_COMM_WORLD_RANK={rank}" in environ:
            found.append(int(pid))
    return found


def logged_steps(out):
    """The rows of the run's metrics.jsonl so far (0 before the first)."""
    try:
        with open(os.path.join(out, "metrics.jsonl")) as f:
            return sum(1 for _ in f)
    except OSError:
        return 0
