"""The build backend of ``pip install ./python``: maturin's, after one check that cargo is
on PATH. Without it maturin would try to install a Rust toolchain itself and fail with a
traceback; this says in one line what to do instead."""

from __future__ import annotations

import shutil
import sys

import maturin
from maturin import build_sdist, get_requires_for_build_sdist  # noqa: F401 (PEP 517 hooks)

NO_CARGO = (
    "error: building agentstate from source needs cargo (Rust): install it with rustup "
    "(https://rustup.rs), or install a prebuilt wheel (scripts/build-wheel.sh makes one on a "
    "machine with cargo)"
)


def _need_cargo() -> None:
    if not shutil.which("cargo"):
        sys.stderr.write(NO_CARGO + "\n")
        raise SystemExit(1)


def get_requires_for_build_wheel(config_settings=None):
    """The first hook pip calls: where a machine without cargo stops, with one line."""
    _need_cargo()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    """As :func:`get_requires_for_build_wheel`, for ``pip install -e``."""
    _need_cargo()
    return maturin.get_requires_for_build_editable(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """maturin's, once cargo is there."""
    _need_cargo()
    return maturin.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    """maturin's, once cargo is there."""
    _need_cargo()
    return maturin.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """maturin's release build of the wheel, once cargo is there."""
    _need_cargo()
    return maturin.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """maturin's editable build, once cargo is there."""
    _need_cargo()
    return maturin.build_editable(wheel_directory, config_settings, metadata_directory)
