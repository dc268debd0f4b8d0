"""The run/test plumbing says what it must: Streamlit settings, make targets, the CI job's packages."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FULL_SCALE_LABELS_MB = 250  # a full-scale labels file (docs/REFERENCE.md §6), rounded up


@pytest.fixture(scope="module")
def streamlit_config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))


def test_streamlit_config_keeps_usage_private_and_requests_checked(streamlit_config):
    assert streamlit_config["browser"]["gatherUsageStats"] is False
    assert streamlit_config["server"]["enableXsrfProtection"] is True
    assert streamlit_config["server"]["headless"] is True


def test_streamlit_config_takes_page_imports_and_leaves_full_scale_files_to_the_command_line(streamlit_config):
    from db.rules.limits import MAX_UPLOAD_MB

    limit = streamlit_config["server"]["maxUploadSize"]
    # What a page import needs, no more: the server holds an upload in memory whole.
    assert isinstance(limit, int) and limit == MAX_UPLOAD_MB and 16 <= limit < FULL_SCALE_LABELS_MB
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"uploads up to {limit} MB" in readme and "`clinconsensus import`" in readme
    # A file the uploader accepts must also fit through the websocket.
    assert streamlit_config["server"].get("maxMessageSize", 200) >= limit


def test_streamlit_config_hides_developer_tools_and_error_details(streamlit_config):
    client = streamlit_config["client"]
    assert client["toolbarMode"] == "viewer"
    assert client["showErrorDetails"] in ("none", False)


def test_streamlit_knows_every_option_in_the_config(streamlit_config):
    """A misspelt option would silently do nothing; check each against Streamlit's own option table."""
    from streamlit import config

    known = config._config_options_template
    for section, options in streamlit_config.items():
        for name in options:
            assert f"{section}.{name}" in known, f"unknown Streamlit option {section}.{name}"


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.MULTILINE))


def test_makefile_has_run_test_and_bench():
    assert {"run", "test", "bench"} <= _make_targets()


def test_make_test_runs_the_whole_suite_and_fails_on_an_empty_one():
    dry_run = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True)
    assert dry_run.returncode == 0, dry_run.stderr
    assert "-m pytest" in dry_run.stdout
    assert "tests/" not in dry_run.stdout.split("-m pytest", 1)[1].split("\n", 1)[0], (
        "make test must not narrow the suite"
    )
    assert "status -eq 5" in dry_run.stdout


def test_make_run_seeds_the_demo_only_when_empty_and_serves():
    dry_run = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True)
    assert dry_run.returncode == 0, dry_run.stderr
    assert "clinconsensus migrate" in dry_run.stdout
    assert 'if [ "$cases" = 0 ]' in dry_run.stdout
    assert "clinconsensus demo --scale small" in dry_run.stdout
    assert "clinconsensus serve --port 8501" in dry_run.stdout


def test_the_bytecode_compiled_is_every_package_the_project_installs():
    """`make run` compiles in the background, and the benchmarks at once, the project's own packages: the same
    top-level packages pyproject.toml installs."""
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]
    compiled = re.search(r"^APP_PACKAGES := (.+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert compiled is not None
    assert sorted(compiled.group(1).split()) == sorted({name.split(".")[0] for name in packages})
    for target in ("bench", "bench-quick", "bench-growth"):
        dry_run = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True)
        assert dry_run.returncode == 0, dry_run.stderr
        commands = dry_run.stdout.splitlines()
        compile_at = next(i for i, line in enumerate(commands) if "-m cli.compile_later" in line)
        assert "--url" not in commands[compile_at] and compiled.group(1) in commands[compile_at]
        assert any("-m benchmarks." in line for line in commands[compile_at + 1 :]), f"{target} compiles first"


def test_ci_job_installs_the_servers_the_tests_need_and_requires_them():
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert script.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in script
    packages = re.search(r"^PACKAGES=\(([^)]*)\)", script, flags=re.MULTILINE)
    assert packages, "the CI job lists its Debian packages in PACKAGES=(…)"
    names = packages.group(1).split()
    for needed in ("postgresql", "chromium", "fonts-noto-cjk"):
        assert needed in names
    assert "apt-get update" in script
    assert "DEBIAN_FRONTEND=noninteractive" in script
    assert "CLINCONSENSUS_REQUIRE_POSTGRES=1" in script and "CLINCONSENSUS_REQUIRE_BROWSER=1" in script
    assert re.search(r"make test\b", script)
    assert "playwright install" not in script
    result = subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
