"""The window's pages: each a ``PageWidget`` (``base.py``), registered by ``desktop/ui/app.py``."""
