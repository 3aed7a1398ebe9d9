"""History: the SQLite store, rollups and retention, and the nvidia-smi log importer."""
