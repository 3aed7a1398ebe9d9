"""The weekly report rendered for people: its HTML page, its PNG charts, and PDF/HTML/CSV/JSON export (no page)."""
