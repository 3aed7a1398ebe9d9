"""Reusable widgets of the window: cards, live charts, the verdict card, the Compare dialog, ...; no page."""
