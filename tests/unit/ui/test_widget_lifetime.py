"""A widget a test registers with qtbot lives until pytest-qt closes it, whatever the collector does.

pytest-qt holds registered widgets weakly; a page kept alive only by its own reference cycles could be
collected while pytest-qt's ``processEvents`` after the test painted it, deleting the view mid-paint
(a segfault in ``GraphicsView.paintEvent`` that killed a CI run). ``conftest.py`` holds them.
"""

from __future__ import annotations

import gc
import weakref

import pytest
from PySide6.QtWidgets import QWidget


@pytest.mark.parametrize("register", ["addWidget", "add_widget"])
def test_a_registered_widget_outlives_the_tests_last_reference(qtbot, register):
    widget = QWidget()
    getattr(qtbot, register)(widget)
    ref = weakref.ref(widget)
    del widget
    gc.collect()
    assert ref() is not None, "pytest-qt's weak reference alone let the widget go before its teardown"
