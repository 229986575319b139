"""pytest plugin for the one-shot GPU run (tools/gpu_session.sh): every failure's report is
appended to ``$PYTEST_LIVE_LOG`` the moment it happens, so a run stopped at its time cap
still says why each test failed (pytest prints tracebacks only at the end)."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("PYTEST_LIVE_LOG")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"\n===== {report.nodeid} [{report.when}] {report.duration:.1f}s\n"
                    f"{report.longreprtext}\n")
