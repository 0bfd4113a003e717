"""`--web`: open a job's page (Azure ML Studio) in a browser where there is one, else say where it is.

A browser is tried only where a display exists (DISPLAY or WAYLAND_DISPLAY on Linux; macOS and Windows
always have one): on a server or in CI, webbrowser would start a text browser in the terminal or fail, so
the URL is printed instead. The tests clear both variables (tests/conftest.py), so they never open one.
"""
from __future__ import annotations

import os
import sys


def has_display(environ=None, platform: str | None = None) -> bool:
    env = os.environ if environ is None else environ
    platform = platform or sys.platform
    if platform == "darwin" or platform.startswith("win"):
        return True
    return bool(env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def open_page(url: str) -> bool:
    """True when a browser took the URL; False where there is none (the caller prints it)."""
    if not has_display():
        return False
    import webbrowser

    try:
        return bool(webbrowser.open(url, new=2))
    except webbrowser.Error:
        return False
