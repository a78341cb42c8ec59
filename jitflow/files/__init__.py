"""Files jitflow writes: whether a folder can be trusted to hold code, and making private ones
(folder_trust.py); files kept between processes, read back as untrusted input (kept_file.py); where
an exported library or a written report may go, and writing it atomically (export_path.py)."""
