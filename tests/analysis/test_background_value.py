"""The dashboard's background build (analysis/background.py): never blocks a reader, always catches up."""

from __future__ import annotations

import threading

from analysis.background import BackgroundValue


def test_readers_get_the_last_value_at_once_and_a_newer_version_is_built_after_the_one_running():
    started, finished, release = [], [], threading.Event()

    def build(version):
        started.append(version)
        release.wait(30)
        finished.append(version)
        return f"grid of {version}"

    value = BackgroundValue(build)
    first = value.get(1)
    assert (first.value, first.current) == (None, False)  # nothing built yet: the reader is not held up
    # 1 is building (held until released): a reader of 2 is answered before that build ends; 2 waits its turn
    assert value.get(2).value is None and finished == []
    release.set()
    latest = value.wait(2, 10)  # 2 is started once 1 is done
    assert (latest.value, latest.version, latest.current) == ("grid of 2", 2, True)
    assert started == [1, 2]
    again = value.get(2)
    assert again.current and started == [1, 2]  # the same version is not rebuilt


def test_a_failed_build_is_reported_for_its_version_and_the_next_version_tries_again():
    def build(version):
        if version == "bad":
            raise ValueError("broken data")
        return version

    value = BackgroundValue(build)
    failed = value.wait("bad", 5)
    assert isinstance(failed.error, ValueError) and failed.value is None
    recovered = value.wait("good", 5)
    assert recovered.error is None and recovered.value == "good"
