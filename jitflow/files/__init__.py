"""Files jitflow writes: whether a folder can be trusted to hold code, and making private ones
(folder_trust.py); where an exported library or a written report may go, and writing it atomically
(export_path.py)."""
