"""`python -m replay.loop`: rounds of collect → pairs → (verify) → train → serve → evaluate, each stage the
project's own command run as a child process, so the loop adds no second implementation of any of them.

Owns: the loop's settings (`config`), its ledger `loop.json` — which stage of which round is done, with
its figures and time, so a killed loop resumes at the stage it was in (`ledger`) —, the students it serves
and how (`serving`, `students`), the stages' command lines and the figures read back from their outputs
(`stages`), the order of stages (`run`) and `loop.md` / `loop.png` (`report`). `cli` is the command line.
Must not: ask a teacher, roll out, train or score itself; every one of those is a stage's command.
"""
