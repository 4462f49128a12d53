"""The run folder `--out DIR` as one unit, and what every stage writes into it.

Owns: atomic files (`files`: written beside the target, then `os.replace`; the run's file names), the
swap-in that leaves a failed or interrupted run's OUT as it was (`outdir`), and `report.json`
(`report`: keys fixed by DESIGN.md).
Must not: know about teachers, consensus or formats.
"""
