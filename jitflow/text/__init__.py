"""Text for people: how jitflow writes byte sizes, durations, plurals and tables (format.py). It
imports nothing else of jitflow, so every module may use it."""
