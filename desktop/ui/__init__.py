"""All Qt code: app wiring, the main window, pages, charts, tray, dialogs and reports."""
